package guard

import (
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
	"google.golang.org/grpc/encoding"
)

// grpc-go decompresses a message (gzip, zstd, snappy: whatever compressors
// are registered, process-wide) before any codec, interceptor or middleware
// sees it, each up to the server's message limit. Nothing bounds how many
// it decompresses at once: 96 concurrent zstd requests of a few KB, each
// expanding past 16 MiB, took the gateway to 2.1 GB. Decompression starts
// only once the whole compressed message has arrived, and then needs only
// CPU, so waiting for a slot cannot be held up by a slow client.

// decompressSlots bounds the gRPC messages being decompressed at once.
var decompressSlots = newSlots(DefaultGRPCDecompressions)

// DefaultGRPCDecompressions is the default number of gRPC messages
// decompressed at once: at 16 MiB each (the default message limit), about
// 128 MiB of output and the decoders' own state.
const DefaultGRPCDecompressions = 8

// SetGRPCDecompressions sets how many gRPC messages the process decompresses
// at once (n < 1: 1); others wait. It applies to the compressors wrapped by
// BoundGRPCDecompression.
func SetGRPCDecompressions(n int) { decompressSlots.resize(max(n, 1)) }

// BoundGRPCDecompression wraps every gRPC compressor registered under names
// so that their decompression takes a slot. Like encoding.RegisterCompressor,
// it must be called from an init function, after the compressors' own
// registration (import their packages first).
func BoundGRPCDecompression(names ...string) {
	for _, n := range names {
		c := encoding.GetCompressor(n)
		switch c.(type) {
		case nil, boundedCompressor, *boundedZstd:
			continue
		}
		if n == "zstd" {
			encoding.RegisterCompressor(newBoundedZstd(c))
			continue
		}
		encoding.RegisterCompressor(boundedCompressor{c})
	}
}

// maxZstdWindow is the largest window a gRPC zstd message may declare. The
// collector's own zstd compressor writes 512 KiB windows, zstd's strongest
// levels 8 MiB; a client-chosen window is memory the server must give.
const maxZstdWindow = 8 << 20

// boundedZstd decompresses zstd with decoders of bounded window, kept in a
// pool of at most DefaultGRPCDecompressions and reset as soon as grpc-go
// is done with them: the registered one (configgrpc's) takes the client's
// window (up to 512 MiB) and gets its decoders back only when a read fails
// or the garbage collector finalizes them, so a message abandoned at the
// size limit leaves its decoder's buffers behind.
type boundedZstd struct {
	encoding.Compressor // compression, and the name
	pool                chan *zstd.Decoder
}

func newBoundedZstd(c encoding.Compressor) *boundedZstd {
	return &boundedZstd{Compressor: c, pool: make(chan *zstd.Decoder, DefaultGRPCDecompressions)}
}

func (b *boundedZstd) Decompress(r io.Reader) (io.Reader, error) {
	decompressSlots.acquire()
	var d *zstd.Decoder
	select {
	case d = <-b.pool:
	default:
		var err error
		d, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(maxZstdWindow))
		if err != nil {
			decompressSlots.release()
			return nil, err
		}
	}
	if err := d.Reset(r); err != nil {
		b.put(d)
		decompressSlots.release()
		return nil, err
	}
	return &zstdReader{d: d, b: b}, nil
}

func (b *boundedZstd) put(d *zstd.Decoder) {
	if d.Reset(nil) != nil {
		return
	}
	select {
	case b.pool <- d:
	default: // the pool is full: let it go
	}
}

// zstdReader holds a decoder and a slot until grpc-go closes it.
type zstdReader struct {
	d    *zstd.Decoder
	b    *boundedZstd
	once sync.Once
}

func (z *zstdReader) Read(p []byte) (int, error) { return z.d.Read(p) }

func (z *zstdReader) Close() error {
	z.once.Do(func() {
		z.b.put(z.d)
		decompressSlots.release()
	})
	return nil
}

type boundedCompressor struct{ encoding.Compressor }

func (b boundedCompressor) Decompress(r io.Reader) (io.Reader, error) {
	decompressSlots.acquire()
	dr, err := b.Compressor.Decompress(r)
	if err != nil {
		decompressSlots.release()
		return nil, err
	}
	return &slotReader{Reader: dr}, nil
}

// slotReader holds a slot until closed: grpc-go closes a decompressor's
// reader (if it is an io.Closer) once it has read the message or given up.
type slotReader struct {
	io.Reader
	once sync.Once
}

func (s *slotReader) Close() error {
	var err error
	s.once.Do(func() {
		if c, ok := s.Reader.(io.Closer); ok {
			err = c.Close()
		}
		decompressSlots.release()
	})
	return err
}

// slots is a counting semaphore whose size can change.
type slots struct {
	mu    sync.Mutex
	cond  *sync.Cond
	used  int
	limit int
}

func newSlots(n int) *slots {
	s := &slots{limit: n}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *slots) acquire() {
	s.mu.Lock()
	for s.used >= s.limit {
		s.cond.Wait()
	}
	s.used++
	s.mu.Unlock()
}

func (s *slots) release() {
	s.mu.Lock()
	s.used--
	s.mu.Unlock()
	s.cond.Signal()
}

func (s *slots) resize(n int) {
	s.mu.Lock()
	s.limit = n
	s.mu.Unlock()
	s.cond.Broadcast()
}
