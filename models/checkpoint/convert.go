package checkpoint

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models/nn"
	"github.com/tcc-dev/tcc/sim/numerics"
)

// Item is one weight buffer to convert: its programs.json buffer and
// source, and how the checkpoint stores the source tensor.
type Item struct {
	Buffer codegen.BufferEntry
	Source hostcfg.WeightSource
	Weight Weight
	dtype  ir.DType
	layout ir.Layout
}

// Bytes is the size of the buffer on one device.
func (it Item) Bytes() int64 { return int64(it.Buffer.PageSize) * int64(it.Buffer.Pages) }

// Plan resolves every weight of the contract against the checkpoint
// before anything is converted: each weight needs a source, a buffer
// entry, a dtype and layout tcc packs, and a checkpoint tensor of the
// right storage. Errors name the buffer and tensor.
func (s *Source) Plan(pf *codegen.ProgramsFile) ([]Item, error) {
	if pf == nil || pf.Manifest == nil {
		return nil, fmt.Errorf("checkpoint: the build has no manifest (programs.json buffers and weights)")
	}
	bufs := map[string]codegen.BufferEntry{}
	for _, b := range pf.Buffers {
		bufs[b.Name] = b
	}
	var items []Item
	for _, w := range pf.Weights {
		b, ok := bufs[w.Buffer]
		if !ok {
			return nil, fmt.Errorf("checkpoint: weight buffer %q is not in programs.json buffers", w.Buffer)
		}
		if w.Source == nil {
			return nil, fmt.Errorf("checkpoint: weight buffer %q has no source (the model does not describe its checkpoint tensors)", w.Buffer)
		}
		it := Item{Buffer: b, Source: *w.Source}
		var err error
		if it.dtype, err = ir.ParseDType(b.DType); err != nil {
			return nil, fmt.Errorf("checkpoint: buffer %q: dtype: %v", b.Name, err)
		}
		if it.layout, err = ir.ParseLayout(b.Layout); err != nil {
			return nil, fmt.Errorf("checkpoint: buffer %q: layout: %v", b.Name, err)
		}
		if it.Weight, err = s.Lookup(w.Source.Tensor); err != nil {
			return nil, fmt.Errorf("weight buffer %q: %w", b.Name, err)
		}
		items = append(items, it)
	}
	return items, nil
}

// axisMap returns, for device d of n, the whole-tensor index along axis
// of every entry of the device's share (-1 for padding), computed by
// nn.Share.Cut itself on an index tensor so it is the model's own cut.
func axisMap(share nn.Share, shape ir.Shape, axis, d, n int) ([]int, error) {
	l := shape[axis]
	if share.Axis != axis {
		idx := make([]int, l)
		for i := range idx {
			idx[i] = i
		}
		return idx, nil
	}
	ishape := make(ir.Shape, len(shape))
	for i := range ishape {
		ishape[i] = 1
	}
	ishape[axis] = l
	iota := make([]float32, l)
	for i := range iota {
		iota[i] = float32(i + 1) // 0 marks padding
	}
	cut, _, err := share.Cut(iota, ishape, d, n)
	if err != nil {
		return nil, err
	}
	idx := make([]int, len(cut))
	for i, v := range cut {
		idx[i] = int(v) - 1
	}
	return idx, nil
}

// Convert writes the page bytes of it on each of len(out) devices to
// out[d], 32 rows at a time (one tile row). The result is exactly
// it.Bytes() per device.
func (s *Source) Convert(it Item, out []io.Writer) error {
	m, err := s.open(it.Weight)
	if err != nil {
		return err
	}
	return convertMatrix(it, m, out)
}

func convertMatrix(it Item, m *matrix, out []io.Writer) error {
	name := it.Buffer.Name
	src := it.Source
	tr, tc := m.rows, m.cols
	at := m.at
	if src.Transposed {
		tr, tc = m.cols, m.rows
		at = func(i, j int) float32 { return m.at(j, i) }
	}
	whole := ir.Shape{tr, tc}
	rank1 := len(it.Weight.Shape) == 1
	if rank1 {
		if src.Transposed {
			return fmt.Errorf("checkpoint: buffer %q: source %q is 1-D and cannot be transposed", name, src.Tensor)
		}
		whole = ir.Shape{tc}
	}
	share := nn.Share{Axis: src.Axis, Parts: src.Parts, Blocks: src.Blocks, Pad: src.Pad}
	n := len(out)
	for d := 0; d < n; d++ {
		rowIdx, colIdx := []int{0}, []int(nil)
		var err error
		if !rank1 {
			if rowIdx, err = axisMap(share, whole, 0, d, n); err != nil {
				return fmt.Errorf("checkpoint: buffer %q device %d: %v", name, d, err)
			}
		}
		if colIdx, err = axisMap(share, whole, whole.Rank()-1, d, n); err != nil {
			return fmt.Errorf("checkpoint: buffer %q device %d: %v", name, d, err)
		}
		shape := ir.Shape{len(rowIdx), len(colIdx)}
		if rank1 {
			shape = ir.Shape{len(colIdx)}
		}
		if err := emit(it, shape, rowIdx, colIdx, at, out[d], d); err != nil {
			return err
		}
	}
	return nil
}

// emit packs one device's [len(rowIdx), len(colIdx)] share.
func emit(it Item, shape ir.Shape, rowIdx, colIdx []int, at func(i, j int) float32, w io.Writer, d int) error {
	b := it.Buffer
	if !shape.Equal(ir.Shape(b.Shape)) {
		return fmt.Errorf("checkpoint: buffer %q device %d: source %q %v cut to %s, but programs.json declares shape %v", b.Name, d, it.Source.Tensor, it.Weight.Shape, shape, b.Shape)
	}
	rows, cols := len(rowIdx), len(colIdx)
	val := func(r, c int) float32 {
		i, j := rowIdx[r], colIdx[c]
		if i < 0 || j < 0 {
			return 0
		}
		return at(i, j)
	}
	var written int64
	switch it.layout {
	case ir.TileLayout:
		chunk := make([]float32, ir.TileSize*cols)
		for r0 := 0; r0 < rows; r0 += ir.TileSize {
			clear(chunk)
			for r := r0; r < min(r0+ir.TileSize, rows); r++ {
				for c := 0; c < cols; c++ {
					chunk[(r-r0)*cols+c] = val(r, c)
				}
			}
			bs, err := numerics.PackTilesHost(it.dtype, numerics.Tilize(chunk, ir.TileSize, cols))
			if err != nil {
				return fmt.Errorf("checkpoint: buffer %q device %d: %v", b.Name, d, err)
			}
			if _, err := w.Write(bs); err != nil {
				return err
			}
			written += int64(len(bs))
		}
	case ir.RowMajorLayout:
		eb := it.dtype.ElemBytes()
		row := make([]byte, cols*eb)
		for r := 0; r < rows; r++ {
			for c := 0; c < cols; c++ {
				x := val(r, c)
				switch it.dtype {
				case ir.BF16:
					binary.LittleEndian.PutUint16(row[2*c:], numerics.BF16Bits(x))
				case ir.FP32:
					binary.LittleEndian.PutUint32(row[4*c:], math.Float32bits(x))
				default:
					return fmt.Errorf("checkpoint: buffer %q: %s row-major weights are not supported", b.Name, it.dtype)
				}
			}
			if _, err := w.Write(row); err != nil {
				return err
			}
			written += int64(len(row))
		}
	default:
		return fmt.Errorf("checkpoint: buffer %q: layout %s is not supported", b.Name, it.layout)
	}
	if written != it.Bytes() {
		return fmt.Errorf("checkpoint: buffer %q device %d: packed %d bytes, programs.json declares %d pages of %d B", b.Name, d, written, b.Pages, b.PageSize)
	}
	return nil
}
