package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
)

// MaxHeaderBytes is the largest JSON header accepted (the limit of the
// reference implementation): a larger length is refused before anything
// is allocated.
const MaxHeaderBytes = 100_000_000

// DType is a safetensors element type.
type DType string

// The element types tcc reads.
const (
	BF16    DType = "BF16"
	F16     DType = "F16"
	F32     DType = "F32"
	F8E4M3  DType = "F8_E4M3"
	U8      DType = "U8"
	I32     DType = "I32"
	metaKey       = "__metadata__"
)

// Size is the element size in bytes, 0 for an unknown dtype.
func (d DType) Size() int {
	switch d {
	case BF16, F16:
		return 2
	case F32, I32:
		return 4
	case F8E4M3, U8:
		return 1
	}
	return 0
}

// Info describes one tensor of a file: its dtype, shape and the byte range
// [Begin, End) of its data relative to the start of the data section.
type Info struct {
	Name  string
	DType DType
	Shape []int
	Begin int64
	End   int64
}

// Numel is the element count (1 for a scalar).
func (t Info) Numel() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// Header is a parsed, validated safetensors header.
type Header struct {
	// Tensors sorted by name.
	Tensors  []Info
	Metadata map[string]string
	// DataStart is the file offset of the data section (8 + header length).
	DataStart int64
	byName    map[string]int
}

// Lookup returns the tensor called name.
func (h *Header) Lookup(name string) (Info, bool) {
	i, ok := h.byName[name]
	if !ok {
		return Info{}, false
	}
	return h.Tensors[i], true
}

type rawTensor struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// ParsePrefix reads the 8-byte header length from prefix (at least 8
// bytes) and checks it against the file size and MaxHeaderBytes. It
// returns the header length.
func ParsePrefix(prefix []byte, fileSize int64) (int64, error) {
	if len(prefix) < 8 || fileSize < 8 {
		return 0, fmt.Errorf("truncated: %d bytes, a safetensors file starts with an 8-byte header length", fileSize)
	}
	n := binary.LittleEndian.Uint64(prefix[:8])
	if n > MaxHeaderBytes {
		return 0, fmt.Errorf("header length %d bytes exceeds the limit of %d bytes (corrupt file or not safetensors)", n, MaxHeaderBytes)
	}
	if int64(n) > fileSize-8 {
		return 0, fmt.Errorf("truncated: header length %d bytes but only %d bytes follow the length field", n, fileSize-8)
	}
	return int64(n), nil
}

// ParseHeader decodes and validates the JSON header json of a file whose
// data section is dataSize bytes long. On success every tensor has a known
// dtype, non-negative dims, a byte range inside the data section of
// exactly numel*size bytes, and no two ranges overlap.
func ParseHeader(js []byte, dataSize int64) (*Header, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(js))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("header: invalid JSON: %v", err)
	}
	if raw == nil {
		return nil, fmt.Errorf("header: JSON is null, want an object")
	}
	h := &Header{byName: map[string]int{}, Metadata: map[string]string{}}
	names := make([]string, 0, len(raw))
	for k := range raw {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		msg := raw[name]
		if name == metaKey {
			if err := json.Unmarshal(msg, &h.Metadata); err != nil {
				return nil, fmt.Errorf("header: __metadata__: want an object of strings: %v", err)
			}
			continue
		}
		var rt rawTensor
		if err := json.Unmarshal(msg, &rt); err != nil {
			return nil, fmt.Errorf("header: tensor %q: want {dtype, shape, data_offsets}: %v", name, err)
		}
		if rt.DType == nil || rt.Shape == nil || rt.DataOffsets == nil {
			missing := []string{}
			if rt.DType == nil {
				missing = append(missing, "dtype")
			}
			if rt.Shape == nil {
				missing = append(missing, "shape")
			}
			if rt.DataOffsets == nil {
				missing = append(missing, "data_offsets")
			}
			return nil, fmt.Errorf("header: tensor %q: missing field %s", name, strings.Join(missing, ", "))
		}
		t := Info{Name: name, DType: DType(*rt.DType)}
		if t.DType.Size() == 0 {
			return nil, fmt.Errorf("header: tensor %q: dtype %q is not supported (want BF16, F16, F32, F8_E4M3, U8 or I32)", name, *rt.DType)
		}
		numel := big(1)
		for i, d := range *rt.Shape {
			if d < 0 || d > math.MaxInt32 {
				return nil, fmt.Errorf("header: tensor %q: shape[%d] = %d out of range", name, i, d)
			}
			t.Shape = append(t.Shape, int(d))
			numel = numel.mul(d)
		}
		if t.Shape == nil {
			t.Shape = []int{}
		}
		off := *rt.DataOffsets
		if len(off) != 2 {
			return nil, fmt.Errorf("header: tensor %q: data_offsets has %d values, want [begin, end]", name, len(off))
		}
		t.Begin, t.End = off[0], off[1]
		if t.Begin < 0 || t.End < t.Begin {
			return nil, fmt.Errorf("header: tensor %q: data_offsets [%d, %d] is not a range", name, t.Begin, t.End)
		}
		if t.End > dataSize {
			return nil, fmt.Errorf("header: tensor %q: data_offsets [%d, %d] end past the data section (%d bytes): file truncated", name, t.Begin, t.End, dataSize)
		}
		want := numel.mul(int64(t.DType.Size()))
		if want.over || int64(want.v) != t.End-t.Begin {
			return nil, fmt.Errorf("header: tensor %q: %s shape %v needs %s bytes but data_offsets [%d, %d] hold %d", name, t.DType, t.Shape, want, t.Begin, t.End, t.End-t.Begin)
		}
		h.byName[name] = len(h.Tensors)
		h.Tensors = append(h.Tensors, t)
	}
	byOff := append([]Info(nil), h.Tensors...)
	sort.Slice(byOff, func(i, j int) bool {
		if byOff[i].Begin != byOff[j].Begin {
			return byOff[i].Begin < byOff[j].Begin
		}
		return byOff[i].End < byOff[j].End
	})
	var prev *Info // the non-empty range ending last so far
	for i := range byOff {
		b := &byOff[i]
		if b.End == b.Begin {
			continue
		}
		if prev != nil && b.Begin < prev.End {
			return nil, fmt.Errorf("header: tensors %q [%d, %d] and %q [%d, %d] overlap (data_offsets)", prev.Name, prev.Begin, prev.End, b.Name, b.Begin, b.End)
		}
		if prev == nil || b.End > prev.End {
			prev = b
		}
	}
	return h, nil
}

// checked is an overflow-checked product.
type checked struct {
	v    uint64
	over bool
}

func big(v uint64) checked { return checked{v: v} }

func (c checked) mul(d int64) checked {
	if c.over || d < 0 {
		return checked{over: true}
	}
	hi, lo := mulU64(c.v, uint64(d))
	if hi != 0 || lo > math.MaxInt64 {
		return checked{over: true}
	}
	return checked{v: lo}
}

func (c checked) String() string {
	if c.over {
		return "more than 2^63"
	}
	return fmt.Sprint(c.v)
}
