package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// Tensor is one tensor to write: Data holds the raw little-endian
// elements (len = numel * DType.Size()).
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// Encode returns the bytes of a safetensors file holding tensors (in name
// order, contiguous) and metadata (nil: none). It fails for a duplicate
// name, an unknown dtype or data of the wrong length.
func Encode(tensors []Tensor, metadata map[string]string) ([]byte, error) {
	ts := append([]Tensor(nil), tensors...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	hdr := map[string]any{}
	if metadata != nil {
		hdr[metaKey] = metadata
	}
	var off int64
	for i, t := range ts {
		if i > 0 && ts[i-1].Name == t.Name {
			return nil, fmt.Errorf("safetensors: duplicate tensor %q", t.Name)
		}
		if t.DType.Size() == 0 {
			return nil, fmt.Errorf("safetensors: tensor %q: unknown dtype %q", t.Name, t.DType)
		}
		n := int64(t.DType.Size())
		for _, d := range t.Shape {
			n *= int64(d)
		}
		if n != int64(len(t.Data)) {
			return nil, fmt.Errorf("safetensors: tensor %q: %s %v needs %d bytes, got %d", t.Name, t.DType, t.Shape, n, len(t.Data))
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		hdr[t.Name] = map[string]any{"dtype": t.DType, "shape": shape, "data_offsets": []int64{off, off + n}}
		off += n
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %v", err)
	}
	for len(js)%8 != 0 { // align the data section like the reference writer
		js = append(js, ' ')
	}
	var buf bytes.Buffer
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(js)))
	buf.Write(n[:])
	buf.Write(js)
	for _, t := range ts {
		buf.Write(t.Data)
	}
	return buf.Bytes(), nil
}

// Write writes a safetensors file at path (see Encode).
func Write(path string, tensors []Tensor, metadata map[string]string) error {
	b, err := Encode(tensors, metadata)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("safetensors: %v", err)
	}
	return nil
}

// WriteSharded writes shards[i] to dir/model-0000{i+1}-of-0000{n}.safetensors
// and the model.safetensors.index.json mapping every tensor to its shard.
func WriteSharded(dir string, shards [][]Tensor) error {
	wm := map[string]string{}
	var total int64
	for i, ts := range shards {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
		if err := Write(filepath.Join(dir, name), ts, map[string]string{"format": "pt"}); err != nil {
			return err
		}
		for _, t := range ts {
			if _, dup := wm[t.Name]; dup {
				return fmt.Errorf("safetensors: tensor %q is in two shards", t.Name)
			}
			wm[t.Name] = name
			total += int64(len(t.Data))
		}
	}
	idx, err := json.MarshalIndent(map[string]any{"metadata": map[string]int64{"total_size": total}, "weight_map": wm}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, IndexFile), append(idx, '\n'), 0o644)
}

// WriteStream writes a safetensors file at path whose tensors are specs
// (Data ignored) in name order, calling fill once per tensor to write
// exactly its bytes: a checkpoint larger than memory can be written. The
// file is removed when fill fails or writes the wrong number of bytes.
func WriteStream(path string, specs []Tensor, fill func(t Tensor, w io.Writer) error) (err error) {
	ts := append([]Tensor(nil), specs...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	hdr := map[string]any{metaKey: map[string]string{"format": "pt"}}
	var off int64
	sizes := make([]int64, len(ts))
	for i, t := range ts {
		n := int64(t.DType.Size())
		for _, d := range t.Shape {
			n *= int64(d)
		}
		if n == 0 && t.DType.Size() == 0 {
			return fmt.Errorf("safetensors: tensor %q: unknown dtype %q", t.Name, t.DType)
		}
		sizes[i] = n
		hdr[t.Name] = map[string]any{"dtype": t.DType, "shape": t.Shape, "data_offsets": []int64{off, off + n}}
		off += n
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("safetensors: %v", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(js)))
	bw.Write(n[:])
	bw.Write(js)
	for i, t := range ts {
		cw := &countWriter{w: bw}
		if err := fill(t, cw); err != nil {
			return fmt.Errorf("safetensors: %s: tensor %q: %v", path, t.Name, err)
		}
		if cw.n != sizes[i] {
			return fmt.Errorf("safetensors: %s: tensor %q: wrote %d bytes, %s %v needs %d", path, t.Name, cw.n, t.DType, t.Shape, sizes[i])
		}
	}
	return bw.Flush()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
