package safetensors

import "testing"

// FuzzHeader feeds arbitrary files to the header parser: it must return a
// header or an error, never panic, and an accepted header's ranges must lie
// inside the data section without overlapping.
func FuzzHeader(f *testing.F) {
	f.Add(file(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8))
	f.Add(file(`{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[1,2],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[],"data_offsets":[4,5]}}`, 5))
	f.Add(file(`{"a":{"dtype":"F8_E4M3","shape":[0],"data_offsets":[0,0]}}`, 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := ParsePrefix(data, int64(len(data)))
		if err != nil {
			return
		}
		dataSize := int64(len(data)) - 8 - n
		h, err := ParseHeader(data[8:8+n], dataSize)
		if err != nil {
			return
		}
		var end int64
		for _, ti := range h.Tensors {
			if ti.Begin < 0 || ti.End > dataSize || ti.End-ti.Begin != ti.Numel()*int64(ti.DType.Size()) {
				t.Fatalf("accepted bad tensor %+v (data %d bytes)", ti, dataSize)
			}
			end += ti.End - ti.Begin
		}
		if end > dataSize {
			t.Fatalf("accepted overlapping tensors: %d bytes in a %d-byte data section", end, dataSize)
		}
	})
}
