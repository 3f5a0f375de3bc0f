package pdataenc

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

func enc(v pcommon.Value) []byte {
	var e Encoder
	e.Value(v)
	return e.B
}

func encAttrs(m pcommon.Map) []byte {
	var e Encoder
	e.Attrs(m)
	return e.B
}

// valueCases covers every value type, its empty and zero forms, and the
// pairs a naive encoding confuses (string vs bytes, "1" vs 1 vs 1.0, 0.0 vs
// -0.0, a nested map vs a slice of the same items, a value moved across a
// boundary).
var valueCases = []struct {
	name string
	set  func(v pcommon.Value)
	want string // hex of the encoding; "" when only distinctness is checked
}{
	{"empty", func(pcommon.Value) {}, "00"},
	{"str empty", func(v pcommon.Value) { v.SetStr("") }, "0100"},
	{"str", func(v pcommon.Value) { v.SetStr("ab") }, "01026162"},
	{"str 1", func(v pcommon.Value) { v.SetStr("1") }, ""},
	{"int 0", func(v pcommon.Value) { v.SetInt(0) }, "020000000000000000"},
	{"int 1", func(v pcommon.Value) { v.SetInt(1) }, "020100000000000000"},
	{"int -1", func(v pcommon.Value) { v.SetInt(-1) }, "02ffffffffffffffff"},
	{"double 1", func(v pcommon.Value) { v.SetDouble(1) }, "03000000000000f03f"},
	{"double 0", func(v pcommon.Value) { v.SetDouble(0) }, ""},
	{"double -0", func(v pcommon.Value) { v.SetDouble(math.Copysign(0, -1)) }, ""},
	{"double NaN", func(v pcommon.Value) { v.SetDouble(math.NaN()) }, ""},
	{"double +Inf", func(v pcommon.Value) { v.SetDouble(math.Inf(1)) }, ""},
	{"bool false", func(v pcommon.Value) { v.SetBool(false) }, "0400"},
	{"bool true", func(v pcommon.Value) { v.SetBool(true) }, "0401"},
	{"map empty", func(v pcommon.Value) { v.SetEmptyMap() }, "0500"},
	{"map", func(v pcommon.Value) { v.SetEmptyMap().PutStr("a", "b") }, "050101610101 62"},
	{"map two", func(v pcommon.Value) { m := v.SetEmptyMap(); m.PutStr("a", "b"); m.PutInt("c", 1) }, ""},
	{"map nested", func(v pcommon.Value) { v.SetEmptyMap().PutEmptyMap("a").PutStr("a", "b") }, ""},
	{"map key moved", func(v pcommon.Value) { v.SetEmptyMap().PutStr("ab", "") }, ""},
	{"map value moved", func(v pcommon.Value) { v.SetEmptyMap().PutStr("", "ab") }, ""},
	{"map empty value", func(v pcommon.Value) { v.SetEmptyMap().PutEmpty("a") }, ""},
	{"slice empty", func(v pcommon.Value) { v.SetEmptySlice() }, "0600"},
	{"slice", func(v pcommon.Value) { v.SetEmptySlice().AppendEmpty().SetStr("b") }, "0601010162"},
	{"slice two", func(v pcommon.Value) {
		s := v.SetEmptySlice()
		s.AppendEmpty().SetStr("a")
		s.AppendEmpty().SetStr("b")
	}, ""},
	{"slice swapped", func(v pcommon.Value) {
		s := v.SetEmptySlice()
		s.AppendEmpty().SetStr("b")
		s.AppendEmpty().SetStr("a")
	}, ""},
	{"slice of map", func(v pcommon.Value) { v.SetEmptySlice().AppendEmpty().SetEmptyMap().PutStr("a", "b") }, ""},
	{"slice of empty", func(v pcommon.Value) { v.SetEmptySlice().AppendEmpty() }, ""},
	{"slice of slice", func(v pcommon.Value) { v.SetEmptySlice().AppendEmpty().SetEmptySlice() }, ""},
	{"bytes empty", func(v pcommon.Value) { v.SetEmptyBytes() }, "0700"},
	{"bytes", func(v pcommon.Value) { v.SetEmptyBytes().FromRaw([]byte("ab")) }, "07026162"},
	{"bytes 1", func(v pcommon.Value) { v.SetEmptyBytes().FromRaw([]byte("1")) }, ""},
}

// TestValue checks the exact bytes of the documented cases and that no two
// cases encode alike.
func TestValue(t *testing.T) {
	seen := map[string]string{}
	for _, c := range valueCases {
		v := pcommon.NewValueEmpty()
		c.set(v)
		got := enc(v)
		if want := strings.ReplaceAll(c.want, " ", ""); want != "" && hex.EncodeToString(got) != want {
			t.Errorf("%s: encoded %x, want %s", c.name, got, want)
		}
		if other, ok := seen[string(got)]; ok {
			t.Errorf("%s and %s encode alike: %x", c.name, other, got)
		}
		seen[string(got)] = c.name
	}
}

// TestValueNoPrefix checks that no case's encoding is a prefix of
// another's: a value ends where its framing says, so a value followed by
// more bytes never reads as another value.
func TestValueNoPrefix(t *testing.T) {
	var all [][]byte
	for _, c := range valueCases {
		v := pcommon.NewValueEmpty()
		c.set(v)
		all = append(all, enc(v))
	}
	for i, a := range all {
		for j, b := range all {
			if i != j && bytes.HasPrefix(b, a) {
				t.Errorf("%s is a prefix of %s", valueCases[i].name, valueCases[j].name)
			}
		}
	}
}

// TestAttrsOrder: the same entries stored in any order encode alike, at
// the top level, in nested maps and in maps inside slices.
func TestAttrsOrder(t *testing.T) {
	keys := []string{"service.name", "a", "zz", "", "b", "host.name", "k8s.pod.name", "a.b", "ab",
		"x1", "x2", "x3", "x4", "x5"} // 14 keys: more than the insertion-sort cut-off
	build := func(order []string) pcommon.Map {
		m := pcommon.NewMap()
		for _, k := range order {
			m.PutStr(k, "v"+k)
		}
		n := m.PutEmptyMap("nested")
		for i := len(order) - 1; i >= 0; i-- {
			n.PutInt(order[i], int64(len(order[i])))
		}
		s := m.PutEmptySlice("list")
		for j := range 3 {
			item := s.AppendEmpty().SetEmptyMap()
			for _, k := range order {
				item.PutBool(k, len(k)%3 == j)
			}
		}
		in := s.AppendEmpty().SetEmptyMap()
		for _, k := range order {
			in.PutStr(k, k)
		}
		return m
	}
	ref := encAttrs(build(slices.Sorted(slices.Values(keys))))
	for i := range keys {
		rot := append(slices.Clone(keys[i:]), keys[:i]...)
		if got := encAttrs(build(rot)); !bytes.Equal(got, ref) {
			t.Errorf("rotation %d encodes differently:\n got %x\nwant %x", i, got, ref)
		}
		slices.Reverse(rot)
		if got := encAttrs(build(rot)); !bytes.Equal(got, ref) {
			t.Errorf("reversed rotation %d encodes differently", i)
		}
	}
	m := build(keys)
	m.PutStr("a", "changed")
	if bytes.Equal(encAttrs(m), ref) {
		t.Error("a changed value encodes like the original")
	}
}

// legacyValue is the encoding before the encoders were merged: map entries
// in stored order. The processor's journal holds log digests taken over it.
func legacyValue(e *Encoder, v pcommon.Value) {
	e.B = append(e.B, byte(v.Type()))
	switch v.Type() {
	case pcommon.ValueTypeMap:
		legacyAttrs(e, v.Map())
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		e.Len(s.Len())
		for i := 0; i < s.Len(); i++ {
			legacyValue(e, s.At(i))
		}
	default:
		e.B = e.B[:len(e.B)-1]
		e.Value(v)
	}
}

func legacyAttrs(e *Encoder, m pcommon.Map) {
	e.Len(m.Len())
	for k, v := range m.All() {
		e.Str(k)
		legacyValue(e, v)
	}
}

// TestAttrsSortedAsBefore: a map whose keys arrive sorted (nested maps
// too) encodes in exactly the bytes of the stored-order encoding, so the
// sort costs such maps nothing; an unsorted one encodes as its sorted
// form. (Log digests keep stored order: TestInOrderAsBefore.)
func TestAttrsSortedAsBefore(t *testing.T) {
	sorted := pcommon.NewMap()
	sorted.PutStr("a", "1")
	sorted.PutEmptyBytes("b").FromRaw([]byte{0, 1})
	n := sorted.PutEmptyMap("c")
	n.PutDouble("x", 1.5)
	n.PutEmptySlice("y").AppendEmpty().SetEmptyMap().PutBool("z", true)
	sorted.PutInt("d", -3)
	sorted.PutEmpty("e")
	var legacy Encoder
	legacyAttrs(&legacy, sorted)
	if got := encAttrs(sorted); !bytes.Equal(got, legacy.B) {
		t.Errorf("sorted map:\n got %x\nwant %x", got, legacy.B)
	}

	unsorted := pcommon.NewMap()
	unsorted.PutStr("b", "1")
	unsorted.PutStr("a", "2")
	legacy.Reset()
	legacyAttrs(&legacy, unsorted)
	if bytes.Equal(encAttrs(unsorted), legacy.B) {
		t.Error("an unsorted map encodes in stored order")
	}
}

// TestInOrderAsBefore: with InOrder, every map (nested ones too) encodes
// in stored order, exactly as the encoder before the sort wrote it, so the
// log digests journals hold stay valid; a reordered map encodes apart.
func TestInOrderAsBefore(t *testing.T) {
	build := func(order ...string) pcommon.Map {
		m := pcommon.NewMap()
		for _, k := range order {
			switch k {
			case "c":
				n := m.PutEmptyMap("c")
				n.PutDouble("y", 1.5)
				n.PutEmptySlice("x").AppendEmpty().SetEmptyMap().PutBool("z", true)
			case "0":
				m.PutEmptyBytes("0").FromRaw([]byte{0, 1})
			default:
				m.PutStr(k, "v"+k)
			}
		}
		return m
	}
	inOrder := func(m pcommon.Map) []byte {
		e := Encoder{InOrder: true}
		e.Attrs(m)
		return e.B
	}
	m := build("b", "a", "c", "0")
	var legacy Encoder
	legacyAttrs(&legacy, m)
	if got := inOrder(m); !bytes.Equal(got, legacy.B) {
		t.Errorf("in order:\n got %x\nwant %x", got, legacy.B)
	}
	if bytes.Equal(inOrder(m), encAttrs(m)) {
		t.Error("InOrder wrote the sorted form of an unsorted map")
	}
	if r := build("0", "a", "b", "c"); bytes.Equal(inOrder(m), inOrder(r)) {
		t.Error("InOrder: a reordered map encodes alike")
	} else if !bytes.Equal(encAttrs(m), encAttrs(r)) {
		t.Error("sorted: a reordered map encodes apart")
	}
}

// TestAttrsRepeatedKey: a malformed map (from the wire) with a repeated key
// keeps those entries in stored order, so swapping their values changes the
// encoding.
func TestAttrsRepeatedKey(t *testing.T) {
	decode := func(attrs string) pcommon.Map {
		js := `{"resourceLogs":[{"resource":{"attributes":[` + attrs + `]}}]}`
		ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		return ld.ResourceLogs().At(0).Resource().Attributes()
	}
	a := decode(`{"key":"k","value":{"intValue":"1"}},{"key":"b","value":{"intValue":"0"}},{"key":"k","value":{"intValue":"2"}}`)
	b := decode(`{"key":"k","value":{"intValue":"2"}},{"key":"b","value":{"intValue":"0"}},{"key":"k","value":{"intValue":"1"}}`)
	if a.Len() != 3 {
		t.Fatalf("the decoder dropped the repeated key: %d entries", a.Len())
	}
	if bytes.Equal(encAttrs(a), encAttrs(b)) {
		t.Error("swapping a repeated key's values does not change the encoding")
	}
	// Sorted stably: the stored-order encoding of b, k=1, k=2.
	var want Encoder
	legacyAttrs(&want, decode(`{"key":"b","value":{"intValue":"0"}},{"key":"k","value":{"intValue":"1"}},{"key":"k","value":{"intValue":"2"}}`))
	if got := encAttrs(a); !bytes.Equal(got, want.B) {
		t.Errorf("repeated key:\n got %x\nwant %x", got, want.B)
	}
}

// TestResourceScope: the dropped counts and every scope field are part of
// the encoding.
func TestResourceScope(t *testing.T) {
	encRes := func(f func(r pcommon.Resource)) string {
		r := pcommon.NewResource()
		r.Attributes().PutStr("service.name", "s")
		f(r)
		var e Encoder
		e.Resource(r)
		return string(e.B)
	}
	if encRes(func(pcommon.Resource) {}) == encRes(func(r pcommon.Resource) { r.SetDroppedAttributesCount(1) }) {
		t.Error("resource: the dropped count is not encoded")
	}
	encScope := func(f func(s pcommon.InstrumentationScope)) string {
		s := pcommon.NewInstrumentationScope()
		s.SetName("n")
		f(s)
		var e Encoder
		e.Scope(s)
		return string(e.B)
	}
	base := encScope(func(pcommon.InstrumentationScope) {})
	for name, f := range map[string]func(s pcommon.InstrumentationScope){
		"name":      func(s pcommon.InstrumentationScope) { s.SetName("n2") },
		"version":   func(s pcommon.InstrumentationScope) { s.SetVersion("1") },
		"name→ver":  func(s pcommon.InstrumentationScope) { s.SetName(""); s.SetVersion("n") },
		"attribute": func(s pcommon.InstrumentationScope) { s.Attributes().PutStr("a", "") },
		"dropped":   func(s pcommon.InstrumentationScope) { s.SetDroppedAttributesCount(1) },
	} {
		if encScope(f) == base {
			t.Errorf("scope: changing the %s does not change the encoding", name)
		}
	}
}

// TestAttrsAllocs: once its buffers have grown, an Encoder writes an
// unsorted, nested map without allocating.
func TestAttrsAllocs(t *testing.T) {
	m := benchMap(false)
	var e Encoder
	e.Attrs(m)
	if n := testing.AllocsPerRun(100, func() { e.Reset(); e.Attrs(m) }); n != 0 {
		t.Errorf("%v allocations per map, want 0", n)
	}
}

// tree is a fuzzer-built attribute value, materialized into pdata in either
// key order.
type tree struct {
	typ  pcommon.ValueType
	str  string
	num  uint64
	kids []tree   // map values or slice items
	keys []string // map keys, unique
}

// treeFrom reads a value from data, bounded in depth and width.
func treeFrom(data []byte, depth int) (tree, []byte) {
	if len(data) == 0 {
		return tree{}, nil
	}
	op, data := data[0], data[1:]
	t := tree{typ: pcommon.ValueType(op % 8)}
	if depth >= 4 && (t.typ == pcommon.ValueTypeMap || t.typ == pcommon.ValueTypeSlice) {
		t.typ = pcommon.ValueTypeStr
	}
	word := func() string {
		n := int(op>>3) % 4
		n = min(n, len(data))
		s := string(data[:n])
		data = data[n:]
		return s
	}
	switch t.typ {
	case pcommon.ValueTypeStr, pcommon.ValueTypeBytes:
		t.str = word()
	case pcommon.ValueTypeInt, pcommon.ValueTypeDouble, pcommon.ValueTypeBool:
		var b [8]byte
		n := copy(b[:], data)
		data = data[n:]
		t.num = uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		if t.typ == pcommon.ValueTypeBool {
			t.num &= 1
		}
	case pcommon.ValueTypeMap, pcommon.ValueTypeSlice:
		n := int(op>>3) % 6
		for range n {
			var key string
			if t.typ == pcommon.ValueTypeMap {
				if len(data) == 0 {
					break
				}
				k := min(int(data[0]%3), len(data)-1)
				key, data = string(data[1:1+k]), data[1+k:]
				if slices.Contains(t.keys, key) {
					continue
				}
				t.keys = append(t.keys, key)
			}
			var kid tree
			kid, data = treeFrom(data, depth+1)
			t.kids = append(t.kids, kid)
		}
	}
	return t, data
}

// put writes t into v, map keys in stored order or reversed.
func (t tree) put(v pcommon.Value, reversed bool) {
	switch t.typ {
	case pcommon.ValueTypeStr:
		v.SetStr(t.str)
	case pcommon.ValueTypeBytes:
		v.SetEmptyBytes().FromRaw([]byte(t.str))
	case pcommon.ValueTypeInt:
		v.SetInt(int64(t.num))
	case pcommon.ValueTypeDouble:
		v.SetDouble(math.Float64frombits(t.num))
	case pcommon.ValueTypeBool:
		v.SetBool(t.num == 1)
	case pcommon.ValueTypeMap:
		m := v.SetEmptyMap()
		for i := range t.kids {
			if reversed {
				i = len(t.kids) - 1 - i
			}
			t.kids[i].put(m.PutEmpty(t.keys[i]), reversed)
		}
	case pcommon.ValueTypeSlice:
		s := v.SetEmptySlice()
		for _, k := range t.kids {
			k.put(s.AppendEmpty(), reversed)
		}
	}
}

// sorted is t with every map's entries in key order.
func (t tree) sorted() tree {
	kids := make([]tree, len(t.kids))
	for i, k := range t.kids {
		kids[i] = k.sorted()
	}
	if t.typ != pcommon.ValueTypeMap {
		t.kids = kids
		return t
	}
	idx := make([]int, len(t.keys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, c int) int { return strings.Compare(t.keys[a], t.keys[c]) })
	s := tree{typ: t.typ}
	for _, i := range idx {
		s.keys = append(s.keys, t.keys[i])
		s.kids = append(s.kids, kids[i])
	}
	return s
}

// canon is t in an obviously unambiguous text form, map keys sorted: two
// trees are the same value exactly when their canon strings are equal.
func (t tree) canon() string {
	var b strings.Builder
	fmt.Fprint(&b, int(t.typ))
	switch t.typ {
	case pcommon.ValueTypeStr, pcommon.ValueTypeBytes:
		fmt.Fprintf(&b, "%q", t.str)
	case pcommon.ValueTypeInt, pcommon.ValueTypeDouble, pcommon.ValueTypeBool:
		fmt.Fprintf(&b, "(%d)", t.num)
	case pcommon.ValueTypeMap:
		idx := make([]int, len(t.keys))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, c int) int { return strings.Compare(t.keys[a], t.keys[c]) })
		b.WriteString("{")
		for _, i := range idx {
			fmt.Fprintf(&b, "%q:%s,", t.keys[i], t.kids[i].canon())
		}
		b.WriteString("}")
	case pcommon.ValueTypeSlice:
		b.WriteString("[")
		for _, k := range t.kids {
			b.WriteString(k.canon() + ",")
		}
		b.WriteString("]")
	}
	return b.String()
}

func mapTree(data []byte) tree {
	t, _ := treeFrom(append([]byte{byte(pcommon.ValueTypeMap) | 5<<3}, data...), 0)
	return t
}

// FuzzEncoderAttrs builds two attribute maps (nested maps, slices, every
// value type) from the two inputs and checks that they encode alike exactly
// when they are the same value, that the order in which keys were stored
// never matters, and that the bytes are those of the map stored sorted.
func FuzzEncoderAttrs(f *testing.F) {
	f.Add([]byte{}, []byte{})
	f.Add([]byte{1, 'a', 1 | 1<<3, 'x'}, []byte{1, 'a', 7 | 1<<3, 'x'})
	f.Add([]byte{1, 'a', 1 | 2<<3, 'x', 'y', 1, 'b', 2, 1}, []byte{1, 'b', 2, 1, 1, 'a', 1 | 2<<3, 'x', 'y'})
	f.Add([]byte{2, 'a', 'b', 1, 'c'}, []byte{1, 'a', 1 | 2<<3, 'b', 'c'})
	f.Add([]byte{1, 'm', 5 | 3<<3, 1, 'x', 4, 1, 1, 'y', 0, 0, 6 | 2<<3, 3, 0, 0, 0, 0, 0, 0, 0, 0x80}, []byte{1, 'm', 6 | 1<<3, 0})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ta, tb := mapTree(a), mapTree(b)
		va, vb, vr := pcommon.NewValueEmpty(), pcommon.NewValueEmpty(), pcommon.NewValueEmpty()
		ta.put(va, false)
		tb.put(vb, false)
		ta.put(vr, true)
		ea, eb, er := encAttrs(va.Map()), encAttrs(vb.Map()), encAttrs(vr.Map())
		if !bytes.Equal(ea, er) {
			t.Fatalf("key order matters:\n%x\n%x\nfor %s", ea, er, ta.canon())
		}
		// The encoding is the stored-order one of the map with its keys
		// sorted: the bytes the log digests are taken over.
		vs := pcommon.NewValueEmpty()
		ta.sorted().put(vs, false)
		var legacy Encoder
		legacyAttrs(&legacy, vs.Map())
		if !bytes.Equal(ea, legacy.B) {
			t.Fatalf("not the stored-order encoding of the sorted map:\n%x\n%x\nfor %s", ea, legacy.B, ta.canon())
		}
		if same := ta.canon() == tb.canon(); same != bytes.Equal(ea, eb) {
			t.Fatalf("same value %v, same encoding %v:\n%s\n%s\n%x\n%x", same, !same, ta.canon(), tb.canon(), ea, eb)
		}
	})
}

func benchMap(sorted bool) pcommon.Map {
	m := pcommon.NewMap()
	keys := []string{"service.name", "http.method", "http.route", "http.status_code", "net.peer.name", "user_agent.original"}
	if sorted {
		slices.Sort(keys)
	}
	for i, k := range keys {
		m.PutStr(k, strings.Repeat("v", 8+i))
	}
	n := m.PutEmptyMap("zz.nested")
	if sorted {
		n.PutDouble("a", 2.5)
		n.PutInt("b", 1)
	} else {
		n.PutInt("b", 1)
		n.PutDouble("a", 2.5)
	}
	n.PutEmptySlice("c").AppendEmpty().SetEmptyBytes().FromRaw([]byte("0123456789abcdef"))
	return m
}

// BenchmarkEncoderAttrs is one log record's or data point's attributes:
// seven entries, one of them a nested map, stored sorted or not; enc=legacy
// is the stored-order encoding the log digests used before, for comparison.
// Beside the wall time it reports cpu-ns/op, the CPU time of the
// benchmark's (locked) thread: on a machine shared with other work it
// leaves out the time the thread waited for a core.
func BenchmarkEncoderAttrs(b *testing.B) {
	for _, sorted := range []bool{true, false} {
		m := benchMap(sorted)
		b.Run(fmt.Sprintf("enc=canonical/sorted=%v", sorted), func(b *testing.B) {
			var e Encoder
			benchCPU(b, func() {
				e.Reset()
				e.Attrs(m)
			})
		})
		b.Run(fmt.Sprintf("enc=legacy/sorted=%v", sorted), func(b *testing.B) {
			var e Encoder
			benchCPU(b, func() {
				e.Reset()
				legacyAttrs(&e, m)
			})
		})
	}
}

// benchCPU runs f b.N times and reports the thread's CPU time per call.
func benchCPU(b *testing.B, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	c0 := threadCPU()
	for range b.N {
		f()
	}
	if cpu := threadCPU() - c0; cpu > 0 {
		b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	}
}
