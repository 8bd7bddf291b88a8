package safetensors

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func f32s(v ...float32) []byte { b, _ := FromFloat32(F32, v); return b }

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	ts := []Tensor{
		{Name: "b", DType: F32, Shape: []int{2, 2}, Data: f32s(1, 2, 3, 4)},
		{Name: "a", DType: BF16, Shape: []int{3}, Data: []byte{0x80, 0x3f, 0, 0x40, 0x40, 0xc0}},
		{Name: "s", DType: F32, Shape: []int{}, Data: f32s(7)},
		{Name: "e", DType: U8, Shape: []int{0}, Data: nil},
	}
	p := filepath.Join(dir, "x.safetensors")
	if err := Write(p, ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if diff := cmp.Diff(map[string]string{"format": "pt"}, f.Header.Metadata); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	var names []string
	for _, ti := range f.Header.Tensors {
		names = append(names, ti.Name)
	}
	if diff := cmp.Diff([]string{"a", "b", "e", "s"}, names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		name string
		want []float32
	}{{"a", []float32{1, 2, -3}}, {"b", []float32{1, 2, 3, 4}}, {"s", []float32{7}}, {"e", []float32{}}} {
		t.Run(tt.name, func(t *testing.T) {
			info, _ := f.Header.Lookup(tt.name)
			b, err := f.Bytes(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ToFloat32(info.DType, b)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, err := f.Bytes("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("missing tensor: got %v", err)
	}
}

func TestSharded(t *testing.T) {
	dir := t.TempDir()
	err := WriteSharded(dir, [][]Tensor{
		{{Name: "x", DType: F32, Shape: []int{1}, Data: f32s(1)}},
		{{Name: "y", DType: F32, Shape: []int{1}, Data: f32s(2)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"x", "y"}, c.Names()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	_, file, err := c.Info("y")
	if err != nil || filepath.Base(file) != "model-00002-of-00002.safetensors" {
		t.Errorf("y is in %q (%v), want shard 2", file, err)
	}
	b, _ := c.Bytes("y")
	if got, _ := ToFloat32(F32, b); got[0] != 2 {
		t.Errorf("y = %v, want 2", got)
	}
	c.Close()
	os.Remove(filepath.Join(dir, "model-00002-of-00002.safetensors"))
	if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), "missing shard") || !strings.Contains(err.Error(), `"y"`) {
		t.Errorf("missing shard: got %v", err)
	}
}

// file builds a safetensors file from a header string and data size.
func file(hdr string, data int) []byte {
	b := make([]byte, 8, 8+len(hdr)+data)
	binary.LittleEndian.PutUint64(b, uint64(len(hdr)))
	b = append(b, hdr...)
	return append(b, make([]byte, data)...)
}

func TestBadFiles(t *testing.T) {
	good := file(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8)
	huge := make([]byte, 16)
	binary.LittleEndian.PutUint64(huge, 100<<20)
	for _, tt := range []struct {
		name, want string
		data       []byte
	}{
		{"empty", "truncated", nil},
		{"short prefix", "truncated", []byte{1, 2, 3}},
		{"100 MB header", "exceeds the limit", huge},
		{"header past end", "truncated: header length", file(`{}`, 0)[:9]},
		{"bad json", "invalid JSON", file(`{"w":`, 0)},
		{"null", "null", file(`null`, 0)},
		{"truncated data", `"w"`, good[:len(good)-1]},
		{"unknown dtype", `dtype "F64"`, file(`{"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}`, 8)},
		{"wrong length", "needs 8 bytes", file(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 8)},
		{"overlap", "overlap", file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8)},
		{"missing field", "missing field shape", file(`{"w":{"dtype":"F32","data_offsets":[0,4]}}`, 4)},
		{"negative offset", "not a range", file(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}}`, 4)},
		{"three offsets", "has 3 values", file(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}`, 4)},
		{"overflowing shape", "more than 2^63", file(`{"w":{"dtype":"F32","shape":[2147483647,2147483647,2147483647],"data_offsets":[0,4]}}`, 4)},
		{"bad metadata", "__metadata__", file(`{"__metadata__":{"a":1}}`, 0)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "bad.safetensors")
			if err := os.WriteFile(p, tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Open(p)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("Open: got %v, want an error naming %s and containing %q", err, p, tt.want)
			}
		})
	}
	p := filepath.Join(t.TempDir(), "ok.safetensors")
	os.WriteFile(p, good, 0o644)
	if f, err := Open(p); err != nil {
		t.Errorf("good file: %v", err)
	} else {
		f.Close()
	}
}

func TestFloat8(t *testing.T) {
	for _, tt := range []struct {
		b    uint8
		want float32
	}{{0x00, 0}, {0x38, 1}, {0xB8, -1}, {0x7E, 448}, {0x01, 1.0 / 512}, {0x08, 1.0 / 64}, {0x3C, 1.5}} {
		if got := F8E4M3ToFloat32(tt.b); got != tt.want {
			t.Errorf("F8E4M3ToFloat32(%#x) = %v, want %v", tt.b, got, tt.want)
		}
		if got := Float32ToF8E4M3(tt.want); got != tt.b {
			t.Errorf("Float32ToF8E4M3(%v) = %#x, want %#x", tt.want, got, tt.b)
		}
	}
	if !math.IsNaN(float64(F8E4M3ToFloat32(0x7F))) {
		t.Error("0x7F is not NaN")
	}
	// every finite code round-trips
	for c := 0; c < 256; c++ {
		v := F8E4M3ToFloat32(uint8(c))
		if v != v || c == 0x80 {
			continue
		}
		if got := Float32ToF8E4M3(v); got != uint8(c) {
			t.Errorf("code %#x -> %v -> %#x", c, v, got)
		}
	}
	for _, h := range []uint16{0x3C00, 0xC000, 0x0001, 0x7BFF, 0x0400} {
		if got := f16(F16ToFloat32(h)); got != h {
			t.Errorf("f16 %#x -> %v -> %#x", h, F16ToFloat32(h), got)
		}
	}
}
