package runtime

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/ir"
)

// Executable is a build loaded on a mesh: every buffer allocated on every
// device, programs ready to launch in order.
type Executable struct {
	Mesh  *Mesh
	Build *codegen.Build
	names map[*ir.Value]string
	// binding maps the build's buffer names to the mesh's tensor names:
	// weights and state are shared by every build loaded on the mesh (the
	// prefill and decode builds of one model), every other buffer is the
	// build's own ("b<N>/<name>").
	binding map[string]string
	dir     string                         // the build's sources on disk, for a chip's JIT
	configs map[int]*hostcfg.ProgramConfig // programs.json's configs of device 0
	// launches counts each program's launches on a chip.
	launches []int
	// persistent is the build as one persistent program (LoadPersistent).
	persistent *kir.Program
}

// Load allocates every buffer of b on every device of m. Weights and state
// (by name) are shared with builds loaded earlier on m; inputs and
// intermediate values get buffers of their own. A build of a mesh row of
// more than one card must be planned for the topology m is cabled as.
func Load(m *Mesh, b *codegen.Build) (*Executable, error) {
	if b.Graph.Mesh != m.Shape {
		return nil, fmt.Errorf("runtime: build is for mesh %s, opened mesh is %s", b.Graph.Mesh, m.Shape)
	}
	if bt, mt := topologyOf(b.Target), topologyOf(m.Target); b.Graph.Mesh.Cols > 1 && bt != mt {
		return nil, fmt.Errorf("runtime: build is planned for topology %s, the mesh %s is cabled as %s (Mesh.UseTopology)", bt, m.Shape, mt)
	}
	m.loads++
	e := &Executable{Mesh: m, Build: b, names: map[*ir.Value]string{}, binding: map[string]string{}}
	for _, s := range b.Buffers {
		dn := s.Name
		if k := s.Value.Kind; k != ir.KindWeight && k != ir.KindState {
			dn = fmt.Sprintf("b%d/%s", m.loads, s.Name)
		}
		t := Tensor{Buffer: s.Buffer(), Shape: s.Shape, TilesTransposed: s.Value.Type.TilesTransposed}
		t.Buffer.Name = dn
		if err := m.Alloc(t); err != nil {
			return nil, err
		}
		e.names[s.Value] = dn
		e.binding[s.Name] = dn
	}
	return e, nil
}

// name is the device buffer of v: its own, or the one Build.BufferOf
// places it in (a state's new value: the state's, which the update is
// written into; a reshape view: its operand's).
func (e *Executable) name(v *ir.Value) (string, error) {
	if s := e.Build.BufferOf(v); s != nil {
		if n, ok := e.names[s.Value]; ok {
			return n, nil
		}
	}
	return "", fmt.Errorf("runtime: value %s (%q) has no device buffer in this build", v, v.Name)
}

// tensor is v's contents as its device buffer holds them: the buffer's
// tensor, or for a value of a shared buffer (codegen.BufferSpec.Values)
// other than the one it is sized for, the value's own shape and page
// layout over the buffer's first pages.
func (e *Executable) tensor(v *ir.Value) (Tensor, error) {
	n, err := e.name(v)
	if err != nil {
		return Tensor{}, err
	}
	t, ok := e.Mesh.tensors[n]
	if !ok {
		return Tensor{}, fmt.Errorf("runtime: no tensor %q", n)
	}
	h := e.Build.Holder(v)
	if s := e.Build.BufferOf(v); s.Values == nil || h == s.Value {
		return t, nil
	}
	ps, pages, err := lower.PageLayout(h.Type)
	if err != nil {
		return Tensor{}, fmt.Errorf("runtime: value %s (%q): %w", v, v.Name, err)
	}
	if ps != t.PageSize || pages > t.Pages {
		return Tensor{}, fmt.Errorf("runtime: value %s (%q) needs %d pages of %d B; its shared buffer %q has %d of %d B", v, v.Name, pages, ps, n, t.Pages, t.PageSize)
	}
	t.DType, t.Layout, t.Pages, t.Shape, t.TilesTransposed = h.Type.DType, h.Type.Layout, pages, h.Type.Shape, h.Type.TilesTransposed
	return t, nil
}

// Upload writes v's row-major contents to every device (the same data on
// each; use UploadTo for per-device shards).
func (e *Executable) Upload(v *ir.Value, data []float32) error {
	for d := 0; d < e.Mesh.Devices(); d++ {
		if err := e.UploadTo(d, v, data); err != nil {
			return err
		}
	}
	return nil
}

// UploadTo writes v's row-major per-device contents to device dev.
func (e *Executable) UploadTo(dev int, v *ir.Value, data []float32) error {
	t, err := e.tensor(v)
	if err != nil {
		return err
	}
	return e.Mesh.upload(dev, t, data)
}

// Download reads v whole: from device 0 when replicated, else every
// device's shard joined along its split axis (ir.Dist.Join; the head's
// vocab-sharded logits, which no program gathers).
func (e *Executable) Download(v *ir.Value) ([]float32, error) {
	if v.Type.Dist.IsReplicated() || e.Mesh.Devices() == 1 {
		return e.DownloadFrom(0, v)
	}
	shards := make([][]float32, e.Mesh.Devices())
	for d := range shards {
		var err error
		if shards[d], err = e.DownloadFrom(d, v); err != nil {
			return nil, err
		}
	}
	return v.Type.Dist.Join(v.Type.Shape, shards)
}

// DownloadFrom reads v from device dev.
func (e *Executable) DownloadFrom(dev int, v *ir.Value) ([]float32, error) {
	t, err := e.tensor(v)
	if err != nil {
		return nil, err
	}
	return e.Mesh.download(dev, t)
}

// RunProgram launches program i on every device (a collective, on all
// devices at once: RunCollective); errors name the program and the op it
// implements.
func (e *Executable) RunProgram(i int) error {
	if i < 0 || i >= len(e.Build.Programs) {
		return fmt.Errorf("runtime: program %d out of range (%d programs)", i, len(e.Build.Programs))
	}
	p := e.Build.Programs[i]
	if IsCollective(p.Kernel) {
		if e.Mesh.chip != nil {
			return e.runOnChip(i, func() error { return e.RunCollective(i) })
		}
		return e.RunCollective(i)
	}
	simRun := func() error {
		for d := 0; d < e.Mesh.Devices(); d++ {
			if _, err := e.Mesh.launch(d, p.Kernel, e.binding); err != nil {
				return fmt.Errorf("runtime: device %d: program %d %s (%s): %w", d, i, p.Kernel.Name, p.Op.Where(), err)
			}
		}
		return nil
	}
	if e.Mesh.chip != nil {
		return e.runOnChip(i, simRun)
	}
	return simRun()
}

// Run launches every program in order on every device.
func (e *Executable) Run() error {
	for i := range e.Build.Programs {
		if err := e.RunProgram(i); err != nil {
			return err
		}
	}
	return nil
}

// UploadPagesTo writes v's page bytes on device dev as they are (a
// device-ready weight cache's bytes, already in the buffer's dtype and
// layout) and returns the row-major values they hold. len(b) must be the
// buffer's pages times its page size.
func (e *Executable) UploadPagesTo(dev int, v *ir.Value, b []byte) ([]float32, error) {
	n, err := e.name(v)
	if err != nil {
		return nil, err
	}
	t, ok := e.Mesh.tensors[n]
	if !ok {
		return nil, fmt.Errorf("runtime: upload: no tensor %q", n)
	}
	if len(b) != t.Pages*t.PageSize {
		return nil, fmt.Errorf("runtime: upload of %q: %d bytes, the buffer holds %d pages of %d B", v.Name, len(b), t.Pages, t.PageSize)
	}
	data, err := Decode(t, b)
	if err != nil {
		return nil, err
	}
	d, err := e.Mesh.device(dev)
	if err != nil {
		return nil, err
	}
	if err := d.WritePages(n, 0, b); err != nil {
		return nil, err
	}
	return data, nil
}
