package runtime

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/runtime/blackhole"
	"github.com/tcc-dev/tcc/runtime/blackhole/access/kmd"
	"github.com/tcc-dev/tcc/sim/kexec"
)

// Backends lists the backend names Open accepts.
var Backends = []string{"sim", "ttsim", "blackhole"}

// Tensor describes a device buffer holding a tensor of one device: its
// buffer (name, memory, dtype, layout, page size and count) and its logical
// per-device shape.
type Tensor struct {
	kir.Buffer
	Shape ir.Shape
	// TilesTransposed: a tile-layout weight stored with every tile
	// transposed (ir.TensorType.TilesTransposed); Encode and Decode
	// transpose each tile.
	TilesTransposed bool
}

// Mesh is an opened set of devices.
type Mesh struct {
	Shape   ir.Mesh
	Backend string
	Target  *target.Target
	devices []*kexec.Device
	tensors map[string]Tensor
	loads   int // builds loaded, for naming their private buffers
	// chip, for the ttsim and blackhole backends, runs every program again
	// and is compared with the simulator (OpenChip).
	chip *blackhole.Device
	// chips are the chips of a multi-device mesh on a chip backend (mesh
	// device d on chips[d]; chips[0] is chip), links their ethernet links.
	chips       []*blackhole.Device
	links       []blackhole.EthLink
	chipResults []ProgramResult
	// beforeLaunch is ChipOptions.BeforeLaunch.
	beforeLaunch func(ProgramResult)
	// compared is ChipOptions.Compared.
	compared func(ProgramResult, Tensor, []byte, []byte)
	// builder is ChipOptions.Builder.
	builder blackhole.Builder
	// tmpDirs are the builds' sources written for the chip's JIT, removed
	// by Close.
	tmpDirs []string
}

// Open opens every device of mesh on backend ("sim" or "blackhole").
func Open(backend string, mesh ir.Mesh) (*Mesh, error) {
	if mesh.Devices() < 1 {
		return nil, fmt.Errorf("runtime: mesh %s has no devices", mesh)
	}
	switch backend {
	case "sim":
	case "blackhole":
		if _, err := kmd.Devices(); err != nil {
			return nil, fmt.Errorf("runtime: backend blackhole: %w", err)
		}
		return nil, fmt.Errorf("runtime: backend blackhole runs through OpenChip (it needs a kernel builder)")
	case "ttsim":
		return nil, fmt.Errorf("runtime: backend ttsim runs through OpenChip (it needs a kernel builder)")
	default:
		return nil, fmt.Errorf("runtime: unknown backend %q (want one of %v)", backend, Backends)
	}
	t := target.Blackhole()
	m := &Mesh{Shape: mesh, Backend: backend, Target: t, tensors: map[string]Tensor{}}
	for i := 0; i < mesh.Devices(); i++ {
		m.devices = append(m.devices, kexec.NewDevice(t))
	}
	return m, nil
}

// Devices is the number of devices in the mesh.
func (m *Mesh) Devices() int { return len(m.devices) }

func (m *Mesh) device(dev int) (*kexec.Device, error) {
	if dev < 0 || dev >= len(m.devices) {
		return nil, fmt.Errorf("runtime: device %d out of range (mesh %s has %d)", dev, m.Shape, len(m.devices))
	}
	return m.devices[dev], nil
}

// Alloc allocates t on every device. Names are unique per mesh; allocating
// a name again with the identical spec shares the existing tensor (the
// prefill and decode builds of a model share weights and state); a spec
// that differs, in transposed tiles (TilesTransposed) included, is an
// error: one build would read the other's layout.
func (m *Mesh) Alloc(t Tensor) error {
	if old, dup := m.tensors[t.Name]; dup {
		if old.Buffer.Same(t.Buffer) && old.Shape.Equal(t.Shape) && old.TilesTransposed == t.TilesTransposed {
			return nil
		}
		return fmt.Errorf("runtime: tensor %q is already allocated as %s %s %s (%d pages of %d B, blocks %+v); cannot reallocate it as %s %s %s (blocks %+v): builds that share a weight must place it alike", t.Name, old.Shape, old.DType, tensorLayout(old), old.Pages, old.PageSize, old.Blocks, t.Shape, t.DType, tensorLayout(t), t.Blocks)
	}
	if err := checkPages(t); err != nil {
		return err
	}
	for i, d := range m.devices {
		if _, err := d.Alloc(t.Buffer); err != nil {
			return fmt.Errorf("runtime: device %d: allocating %q (%d pages of %d B): %w", i, t.Name, t.Pages, t.PageSize, err)
		}
	}
	m.tensors[t.Name] = t
	return nil
}

// tensorLayout names t's layout as the IR's text form does: tile_t for
// a weight stored in transposed tiles.
func tensorLayout(t Tensor) string {
	if t.TilesTransposed {
		return "tile_t"
	}
	return t.Layout.String()
}

// checkPages verifies that the buffer's pages match its shape, layout and dtype.
func checkPages(t Tensor) error {
	var ps, n int
	switch t.Layout {
	case ir.TileLayout:
		ps, n = t.DType.TileBytes(), t.Shape.Tiles()
	case ir.RowMajorLayout:
		ps, n = t.Shape.Cols2D()*t.DType.ElemBytes(), t.Shape.Rows2D()
	}
	if ps == 0 || ps != t.PageSize || n != t.Pages {
		return fmt.Errorf("runtime: tensor %q %s %s %s: buffer has %d pages of %d B, layout needs %d of %d B", t.Name, t.Shape, t.DType, t.Layout, t.Pages, t.PageSize, n, ps)
	}
	return nil
}

// Tensor returns the allocated tensor called name.
func (m *Mesh) Tensor(name string) (Tensor, bool) { t, ok := m.tensors[name]; return t, ok }

// TensorNames lists allocated tensors, sorted.
func (m *Mesh) TensorNames() []string {
	ns := make([]string, 0, len(m.tensors))
	for n := range m.tensors {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// Upload writes row-major data (len = the tensor's element count) to tensor
// name on device dev, converted to the tensor's layout and dtype.
func (m *Mesh) Upload(dev int, name string, data []float32) error {
	if _, err := m.device(dev); err != nil {
		return err
	}
	t, ok := m.tensors[name]
	if !ok {
		return fmt.Errorf("runtime: upload: no tensor %q", name)
	}
	return m.upload(dev, t, data)
}

// upload writes data to device dev's buffer t.Name as t lays it out, from
// its first page.
func (m *Mesh) upload(dev int, t Tensor, data []float32) error {
	d, err := m.device(dev)
	if err != nil {
		return err
	}
	b, err := Encode(t, data)
	if err != nil {
		return err
	}
	return d.WritePages(t.Name, 0, b)
}

// Download reads tensor name from device dev as row-major float32.
func (m *Mesh) Download(dev int, name string) ([]float32, error) {
	if _, err := m.device(dev); err != nil {
		return nil, err
	}
	t, ok := m.tensors[name]
	if !ok {
		return nil, fmt.Errorf("runtime: download: no tensor %q", name)
	}
	return m.download(dev, t)
}

// download reads t.Pages pages of device dev's buffer t.Name as t lays
// them out.
func (m *Mesh) download(dev int, t Tensor) ([]float32, error) {
	d, err := m.device(dev)
	if err != nil {
		return nil, err
	}
	b, err := d.ReadPages(t.Name, 0, t.Pages)
	if err != nil {
		return nil, err
	}
	return Decode(t, b)
}

// Launch runs program p on device dev to completion. A deadlock or a
// broken hardware rule is returned as an error naming core, kernel and CB.
func (m *Mesh) Launch(dev int, p *kir.Program) (*kexec.Stats, error) {
	d, err := m.device(dev)
	if err != nil {
		return nil, err
	}
	if IsCollective(p) {
		return nil, fmt.Errorf("runtime: program %q has ethernet kernels: it is a collective and runs on all devices of a mesh row at once (LaunchCollective)", p.Name)
	}
	return d.Run(p, kexec.RunOptions{})
}

// launch is Launch with program buffer names bound to mesh tensor names.
func (m *Mesh) launch(dev int, p *kir.Program, binding map[string]string) (*kexec.Stats, error) {
	d, err := m.device(dev)
	if err != nil {
		return nil, err
	}
	return d.Run(p, kexec.RunOptions{Binding: binding})
}

// lead, rows, cols give the batched-matrix view of a shape used by tile layout.
func matrixView(s ir.Shape) (lead, rows, cols int) {
	switch len(s) {
	case 0:
		return 1, 1, 1
	case 1:
		return 1, 1, s[0]
	}
	lead = 1
	for _, d := range s[:len(s)-2] {
		lead *= d
	}
	return lead, s[len(s)-2], s[len(s)-1]
}

// Encode converts row-major values to t's page bytes (with
// t.TilesTransposed every tile transposed before it is packed, so a block
// float's exponent groups run along the tensor's rows' dimension).
func Encode(t Tensor, data []float32) ([]byte, error) {
	if len(data) != t.Shape.Numel() {
		return nil, fmt.Errorf("runtime: tensor %q %s: got %d values, want %d", t.Name, t.Shape, len(data), t.Shape.Numel())
	}
	if t.Layout == ir.TileLayout {
		lead, rows, cols := matrixView(t.Shape)
		tiles := numerics.TilizeBatch(data, lead, rows, cols)
		if t.TilesTransposed {
			tiles = numerics.TransposeTiles(tiles)
		}
		b, err := numerics.PackTiles(t.DType, tiles)
		if err != nil {
			return nil, fmt.Errorf("runtime: tensor %q: %w", t.Name, err)
		}
		return b, nil
	}
	eb := t.DType.ElemBytes()
	out := make([]byte, len(data)*eb)
	for i, x := range data {
		switch t.DType {
		case ir.FP32:
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
		case ir.BF16:
			binary.LittleEndian.PutUint16(out[2*i:], numerics.BF16Bits(x))
		case ir.Int32, ir.UInt32:
			if x != float32(math.Trunc(float64(x))) || (t.DType == ir.UInt32 && x < 0) {
				return nil, fmt.Errorf("runtime: tensor %q: element %d = %v is not a valid %s", t.Name, i, x, t.DType)
			}
			v := uint32(int64(x))
			binary.LittleEndian.PutUint32(out[4*i:], v)
		default:
			return nil, fmt.Errorf("runtime: tensor %q: %s has no row-major form", t.Name, t.DType)
		}
	}
	return out, nil
}

// Decode converts t's page bytes to row-major values; it inverts Encode.
func Decode(t Tensor, b []byte) ([]float32, error) {
	if t.Layout == ir.TileLayout {
		tiles, err := numerics.UnpackTiles(t.DType, b)
		if err != nil {
			return nil, fmt.Errorf("runtime: tensor %q: %w", t.Name, err)
		}
		if t.TilesTransposed {
			tiles = numerics.TransposeTiles(tiles)
		}
		lead, rows, cols := matrixView(t.Shape)
		return numerics.UntilizeBatch(tiles, lead, rows, cols), nil
	}
	eb := t.DType.ElemBytes()
	n := t.Shape.Numel()
	if eb == 0 || len(b) < n*eb {
		return nil, fmt.Errorf("runtime: tensor %q: %d bytes cannot hold %d %s values", t.Name, len(b), n, t.DType)
	}
	out := make([]float32, n)
	for i := range out {
		switch t.DType {
		case ir.FP32:
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		case ir.BF16:
			out[i] = numerics.FromBF16Bits(binary.LittleEndian.Uint16(b[2*i:]))
		case ir.Int32:
			out[i] = float32(int32(binary.LittleEndian.Uint32(b[4*i:])))
		case ir.UInt32:
			out[i] = float32(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
	return out, nil
}
