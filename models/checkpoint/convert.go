package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/models/nn"
)

// Item is one weight buffer to convert: its programs.json buffer and
// source, and how the checkpoint stores the source tensor.
type Item struct {
	Buffer codegen.BufferEntry
	Source hostcfg.WeightSource
	Weight Weight
	dtype  ir.DType
	layout ir.Layout
	// transposed: layout tile_t (every tile stored transposed;
	// ir.TensorType.TilesTransposed).
	transposed bool
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
		if b.Layout == ir.TransposedTileLayoutText {
			it.layout, it.transposed = ir.TileLayout, true
		} else if it.layout, err = ir.ParseLayout(b.Layout); err != nil {
			return nil, fmt.Errorf("checkpoint: buffer %q: layout: %v", b.Name, err)
		}
		if it.Weight, err = s.Lookup(w.Source.Tensor); err != nil {
			return nil, fmt.Errorf("weight buffer %q: %w", b.Name, err)
		}
		items = append(items, it)
	}
	return items, nil
}

// Unused lists the checkpoint tensors no item reads (e.g. the mtp.* head
// and the model.visual.* tower of a full release, or activation scales),
// sorted.
func (s *Source) Unused(items []Item) []string {
	used := map[string]bool{}
	for _, it := range items {
		for _, p := range it.Weight.Parts {
			used[p] = true
		}
	}
	var out []string
	for _, n := range s.Ckpt.Names() {
		if !used[n] {
			out = append(out, n)
		}
	}
	return out
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
// out[d] at offsets from 0 to it.Bytes(), every byte exactly once. It
// streams: a plain tensor is read from the mapped checkpoint 32 rows at a
// time (one output tile row, or for a transposed tensor one output tile
// column, i.e. 32 contiguous HF rows), and the mapped pages are released
// once converted, so memory stays bounded by one dequantised tensor.
func (s *Source) Convert(it Item, out []io.WriterAt) error {
	m, err := s.open(it.Weight)
	if err != nil {
		return err
	}
	if m.raw != nil && it.Weight.Kind == Plain {
		name, rowBytes := it.Weight.Parts[0], int64(m.cols*it.Weight.DType.Size())
		m.release = func(i0, i1 int) { s.Ckpt.Release(name, int64(i0)*rowBytes, int64(i1)*rowBytes) }
	}
	m.allowNonFinite = s.AllowNonFinite
	m.rank1 = len(it.Weight.Shape) == 1
	err = convertMatrix(it, m, out)
	for _, p := range it.Weight.Parts {
		if t, _, ierr := s.Ckpt.Info(p); ierr == nil {
			s.Ckpt.Release(p, 0, t.End-t.Begin)
		}
	}
	return err
}

// tilize is numerics.Tilize, every tile transposed for layout tile_t
// (numerics.TilizeTransposed).
func (it Item) tilize(data []float32, rows, cols int) []float32 {
	if it.transposed {
		return numerics.TilizeTransposed(data, rows, cols)
	}
	return numerics.Tilize(data, rows, cols)
}

func convertMatrix(it Item, m *matrix, out []io.WriterAt) error {
	name := it.Buffer.Name
	src := it.Source
	tr, tc := m.rows, m.cols
	if src.Transposed {
		tr, tc = m.cols, m.rows
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
	// Devices convert in parallel: the source is read-only and each
	// device writes its own sink.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for d := 0; d < n; d++ {
		wg.Add(1)
		go func(d int) {
			defer wg.Done()
			errs[d] = convertDevice(it, m, whole, rank1, share, out[d], d, n)
		}(d)
	}
	wg.Wait()
	// Devices reading the same bad source value fail alike: one message each.
	var uniq []error
	seen := map[string]bool{}
	for _, e := range errs {
		if e != nil && !seen[e.Error()] {
			seen[e.Error()] = true
			uniq = append(uniq, e)
		}
	}
	return errors.Join(uniq...)
}

// convertDevice emits device d's share of it.
func convertDevice(it Item, m *matrix, whole ir.Shape, rank1 bool, share nn.Share, w io.WriterAt, d, n int) error {
	name := it.Buffer.Name
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
	return emit(it, shape, rowIdx, colIdx, m, it.Source.Transposed, w, d)
}

// emit packs one device's [len(rowIdx), len(colIdx)] share. byCol: the
// source is read fastest along output columns' indices (a transposed
// tensor), so tile layout is produced one tile column at a time. release
// (may be nil) drops source rows [i0, i1) once they are converted.
func emit(it Item, shape ir.Shape, rowIdx, colIdx []int, m *matrix, byCol bool, w io.WriterAt, d int) error {
	b := it.Buffer
	if !shape.Equal(ir.Shape(b.Shape)) {
		return fmt.Errorf("checkpoint: buffer %q device %d: source %q %v cut to %s, but programs.json declares shape %v", b.Name, d, it.Source.Tensor, it.Weight.Shape, shape, b.Shape)
	}
	release := m.release
	if release == nil {
		release = func(int, int) {}
	}
	rows, cols := len(rowIdx), len(colIdx)
	// read fills dst with source row i at columns idx, checking that
	// every value is finite unless allowed.
	read := func(i int, idx []int, dst []float32) error {
		m.rowInto(i, idx, dst)
		if m.allowNonFinite {
			return nil
		}
		for k, v := range dst {
			if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
				at := fmt.Sprintf("[%d, %d]", i, idx[k])
				if m.rank1 {
					at = fmt.Sprintf("[%d]", idx[k])
				}
				return fmt.Errorf("checkpoint: buffer %q: source %q element %s is %v; weights must be finite (--allow-nonfinite converts them as they are)", b.Name, it.Source.Tensor, at, v)
			}
		}
		return nil
	}
	// row fills dst with output row r (not transposed: source row
	// rowIdx[r] at columns colIdx).
	row := func(r int, dst []float32) error {
		if rowIdx[r] < 0 {
			clear(dst)
			return nil
		}
		return read(rowIdx[r], colIdx, dst)
	}
	span := func(idx []int) (int, int) { // source index range of idx, ignoring padding
		lo, hi := -1, -1
		for _, v := range idx {
			if v >= 0 && (lo < 0 || v < lo) {
				lo = v
			}
			hi = max(hi, v+1)
		}
		return max(lo, 0), max(hi, 0)
	}
	var written int64
	put := func(p []byte, off int64) error {
		if _, err := w.WriteAt(p, off); err != nil {
			return fmt.Errorf("checkpoint: buffer %q device %d: %v", b.Name, d, err)
		}
		written += int64(len(p))
		return nil
	}
	const T = ir.TileSize
	switch {
	case it.layout == ir.TileLayout && byCol:
		tr, tc := (rows+T-1)/T, (cols+T-1)/T
		tb := int64(it.dtype.TileBytes())
		strip := make([]float32, tr*T*T)
		col := make([]float32, rows)
		for c0 := 0; c0 < tc; c0++ {
			clear(strip)
			for c := c0 * T; c < min(c0*T+T, cols); c++ {
				// Output column c is source row colIdx[c] (transposed).
				if colIdx[c] < 0 {
					continue
				}
				if err := read(colIdx[c], rowIdx, col); err != nil {
					return err
				}
				for r, v := range col {
					strip[r*T+c-c0*T] = v
				}
			}
			for r0 := 0; r0 < tr; r0++ {
				bs, err := numerics.PackTilesHost(it.dtype, it.tilize(strip[r0*T*T:(r0+1)*T*T], T, T))
				if err != nil {
					return fmt.Errorf("checkpoint: buffer %q device %d: %v", b.Name, d, err)
				}
				if err := put(bs, (int64(r0)*int64(tc)+int64(c0))*tb); err != nil {
					return err
				}
			}
			release(span(colIdx[c0*T : min(c0*T+T, cols)]))
		}
	case it.layout == ir.TileLayout:
		chunk := make([]float32, T*cols)
		for r0 := 0; r0 < rows; r0 += T {
			clear(chunk)
			for r := r0; r < min(r0+T, rows); r++ {
				if err := row(r, chunk[(r-r0)*cols:(r-r0+1)*cols]); err != nil {
					return err
				}
			}
			bs, err := numerics.PackTilesHost(it.dtype, it.tilize(chunk, T, cols))
			if err != nil {
				return fmt.Errorf("checkpoint: buffer %q device %d: %v", b.Name, d, err)
			}
			if err := put(bs, written); err != nil {
				return err
			}
			if !byCol {
				release(span(rowIdx[r0:min(r0+T, rows)]))
			}
		}
	case it.layout == ir.RowMajorLayout:
		if byCol {
			return fmt.Errorf("checkpoint: buffer %q: transposed row-major weights are not supported", b.Name)
		}
		eb := it.dtype.ElemBytes()
		vals := make([]float32, cols)
		out := make([]byte, cols*eb)
		for r := 0; r < rows; r++ {
			if err := row(r, vals); err != nil {
				return err
			}
			for c, x := range vals {
				switch it.dtype {
				case ir.BF16:
					binary.LittleEndian.PutUint16(out[2*c:], numerics.BF16Bits(x))
				case ir.FP32:
					binary.LittleEndian.PutUint32(out[4*c:], math.Float32bits(x))
				default:
					return fmt.Errorf("checkpoint: buffer %q: %s row-major weights are not supported", b.Name, it.dtype)
				}
			}
			if err := put(out, written); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("checkpoint: buffer %q: layout %s is not supported", b.Name, it.layout)
	}
	if written != it.Bytes() {
		return fmt.Errorf("checkpoint: buffer %q device %d: packed %d bytes, programs.json declares %d pages of %d B", b.Name, d, written, b.Pages, b.PageSize)
	}
	return nil
}
