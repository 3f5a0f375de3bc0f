package datadir

import (
	"encoding/binary"
	"hash/fnv"
)

// A bbolt file read by hand, with plain reads and every length checked:
// bbolt itself maps the file and trusts its pages, so a truncated or
// overwritten file can make it fault (SIGBUS, SIGSEGV), which Go cannot
// recover from. The layout (bbolt v1, format version 2):
//
//	page header, 16 bytes: id u64, flags u16, count u16, overflow u32
//	meta (pages 0 and 1, after the header): magic u32, version u32,
//	  page size u32, flags u32, root bucket (root pgid u64, sequence u64),
//	  freelist pgid u64, high water pgid u64, txid u64, FNV-64a of the 56
//	  bytes before it
//	branch element, 16 bytes: pos u32, ksize u32, pgid u64
//	leaf element, 16 bytes: flags u32, pos u32, ksize u32, vsize u32;
//	  pos counts from the element itself; flag 1 marks a bucket, whose
//	  value is its root pgid u64 and sequence u64, followed, when the root
//	  is 0 (an inline bucket), by a page holding its leaf
const (
	pageHeaderSize = 16
	elemSize       = 16
	branchFlag     = 0x01
	leafFlag       = 0x02
	metaFlag       = 0x04
	bucketElem     = 0x01
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	// maxDepth bounds the nesting the walk follows (bucket in bucket,
	// branch over branch): a real file is a few levels deep.
	maxDepth = 64
)

// boltFile is what could be read of one file.
type boltFile struct {
	data     []byte
	pageSize int
	// meta is the valid meta page with the highest txid; ok says whether
	// either was valid.
	metaOK bool
	root   uint64 // root bucket's root page
	high   uint64 // high water mark: pages below it are in use or free
	txid   uint64
	// tree holds the key/values of bucket "default" reached from the
	// meta's root, pages read once each.
	tree map[string][]byte
	// treeBroken says whether the walk met a page it could not read.
	treeBroken bool
	// scanned holds, for each key found in any leaf page of the file
	// (reachable, free or stale), every distinct value found for it.
	scanned map[string][][]byte
}

type metaPage struct {
	pageSize uint32
	root     uint64
	high     uint64
	txid     uint64
}

func readMeta(data []byte, off int) (metaPage, bool) {
	if off < 0 || off+pageHeaderSize+64 > len(data) {
		return metaPage{}, false
	}
	p := data[off:]
	if binary.LittleEndian.Uint16(p[8:]) != metaFlag {
		return metaPage{}, false
	}
	m := p[pageHeaderSize:]
	if binary.LittleEndian.Uint32(m[0:]) != boltMagic || binary.LittleEndian.Uint32(m[4:]) != boltVersion {
		return metaPage{}, false
	}
	h := fnv.New64a()
	_, _ = h.Write(m[:56])
	if h.Sum64() != binary.LittleEndian.Uint64(m[56:]) {
		return metaPage{}, false
	}
	mp := metaPage{
		pageSize: binary.LittleEndian.Uint32(m[8:]),
		root:     binary.LittleEndian.Uint64(m[16:]),
		high:     binary.LittleEndian.Uint64(m[40:]),
		txid:     binary.LittleEndian.Uint64(m[48:]),
	}
	if mp.pageSize < 512 || mp.pageSize > 1<<20 || mp.pageSize&(mp.pageSize-1) != 0 {
		return metaPage{}, false
	}
	return mp, true
}

// parseBolt reads data as a bbolt file. It never panics on any input and
// takes time linear in len(data) (each page is parsed at most once by the
// walk and once by the scan).
func parseBolt(data []byte, fallbackPageSize int) *boltFile {
	f := &boltFile{data: data, tree: map[string][]byte{}, scanned: map[string][][]byte{}}
	var best metaPage
	m0, ok0 := readMeta(data, 0)
	if ok0 {
		best, f.metaOK = m0, true
	}
	// Meta page 1 is at the second page of the size page 0 says, or,
	// when page 0 is unreadable, at one of the usual sizes.
	sizes := []int{fallbackPageSize, 4096, 8192, 16384, 65536}
	if ok0 {
		sizes = []int{int(m0.pageSize)}
	}
	for _, ps := range sizes {
		if m1, ok := readMeta(data, ps); ok && int(m1.pageSize) == ps && (!f.metaOK || m1.txid > best.txid) {
			best, f.metaOK = m1, true
			break
		}
	}
	f.pageSize = fallbackPageSize
	if f.metaOK {
		f.pageSize, f.root, f.high, f.txid = int(best.pageSize), best.root, best.high, best.txid
	}
	if f.pageSize < 512 {
		f.pageSize = 4096
	}
	if f.metaOK {
		seen := map[uint64]bool{}
		f.walk(f.root, 0, seen, func(k, v []byte, bucket bool) {
			if !bucket || string(k) != "default" {
				return
			}
			f.walkBucket(v, 0, seen, func(k, v []byte, bucket bool) {
				if !bucket {
					f.tree[string(k)] = append([]byte(nil), v...)
				}
			})
		})
	} else {
		f.treeBroken = true
	}
	f.scan()
	return f
}

// page returns page id's bytes (with its overflow pages) when its header
// names it and has one of the flags wanted.
func (f *boltFile) page(id uint64, flags uint16) ([]byte, bool) {
	n := uint64(len(f.data) / f.pageSize)
	if id < 2 || id >= n || (f.high > 0 && id >= f.high) {
		return nil, false
	}
	off := int(id) * f.pageSize
	p := f.data[off:]
	if binary.LittleEndian.Uint64(p) != id || binary.LittleEndian.Uint16(p[8:])&flags == 0 {
		return nil, false
	}
	overflow := uint64(binary.LittleEndian.Uint32(p[12:]))
	if id+overflow >= n {
		return nil, false
	}
	return f.data[off : off+int(overflow+1)*f.pageSize], true
}

// walk visits the leaf elements of the tree under page id (a leaf or
// branch page); seen stops a page from being read twice.
func (f *boltFile) walk(id uint64, depth int, seen map[uint64]bool, each func(k, v []byte, bucket bool)) {
	if depth > maxDepth || seen[id] {
		f.treeBroken = true
		return
	}
	seen[id] = true
	p, ok := f.page(id, branchFlag|leafFlag)
	if !ok {
		f.treeBroken = true
		return
	}
	if binary.LittleEndian.Uint16(p[8:]) == leafFlag {
		if !leafElems(p, each) {
			f.treeBroken = true
		}
		return
	}
	count := int(binary.LittleEndian.Uint16(p[10:]))
	if pageHeaderSize+count*elemSize > len(p) {
		f.treeBroken = true
		return
	}
	for i := range count {
		e := p[pageHeaderSize+i*elemSize:]
		f.walk(binary.LittleEndian.Uint64(e[8:]), depth+1, seen, each)
	}
}

// walkBucket visits the elements of the bucket whose leaf value is v.
func (f *boltFile) walkBucket(v []byte, depth int, seen map[uint64]bool, each func(k, v []byte, bucket bool)) {
	if len(v) < 16 {
		f.treeBroken = true
		return
	}
	root := binary.LittleEndian.Uint64(v)
	if root != 0 {
		f.walk(root, depth+1, seen, each)
		return
	}
	inline := v[16:]
	if len(inline) < pageHeaderSize || binary.LittleEndian.Uint16(inline[8:]) != leafFlag {
		f.treeBroken = true
		return
	}
	if !leafElems(inline, each) {
		f.treeBroken = true
	}
}

// leafElems visits the elements of leaf page p, stopping at the first
// one whose key or value is out of the page. It says whether all were
// read.
func leafElems(p []byte, each func(k, v []byte, bucket bool)) bool {
	count := int(binary.LittleEndian.Uint16(p[10:]))
	if pageHeaderSize+count*elemSize > len(p) {
		return false
	}
	for i := range count {
		at := pageHeaderSize + i*elemSize
		e := p[at:]
		flags := binary.LittleEndian.Uint32(e)
		pos := uint64(binary.LittleEndian.Uint32(e[4:]))
		ksize := uint64(binary.LittleEndian.Uint32(e[8:]))
		vsize := uint64(binary.LittleEndian.Uint32(e[12:]))
		start := uint64(at) + pos
		if flags&^bucketElem != 0 || ksize == 0 || start+ksize+vsize > uint64(len(p)) {
			return false
		}
		k := p[start : start+ksize]
		v := p[start+ksize : start+ksize+vsize]
		each(k, v, flags&bucketElem != 0)
	}
	return true
}

// scan reads every page that looks like a leaf, reachable or not, and
// records every key/value it holds, buckets' inline leaves included.
func (f *boltFile) scan() {
	n := uint64(len(f.data) / f.pageSize)
	var add func(k, v []byte, bucket bool)
	depth := 0
	add = func(k, v []byte, bucket bool) {
		if bucket {
			if depth < 4 && len(v) >= 16+pageHeaderSize && binary.LittleEndian.Uint64(v) == 0 &&
				binary.LittleEndian.Uint16(v[16+8:]) == leafFlag {
				depth++
				leafElems(v[16:], add)
				depth--
			}
			return
		}
		vals := f.scanned[string(k)]
		for _, old := range vals {
			if string(old) == string(v) {
				return
			}
		}
		if len(vals) < 64 { // bounded: a key rewritten often keeps its newest copies in the tree
			f.scanned[string(k)] = append(vals, append([]byte(nil), v...))
		}
	}
	for id := uint64(2); id < n; id++ {
		off := int(id) * f.pageSize
		p := f.data[off:]
		if binary.LittleEndian.Uint64(p) != id || binary.LittleEndian.Uint16(p[8:]) != leafFlag {
			continue
		}
		overflow := uint64(binary.LittleEndian.Uint32(p[12:]))
		end := id + overflow + 1
		if end > n {
			end = n // read what there is; elements past it are refused
		}
		leafElems(f.data[off:int(end)*f.pageSize], add)
	}
}
