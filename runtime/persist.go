package runtime

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/ir"
)

// LoadPersistent builds the persistent program of the executable's build
// (codegen/persist) and allocates its control buffer on every device; Run
// then launches it once per step instead of launching every program.
func (e *Executable) LoadPersistent() (*persist.Plan, error) {
	p, plan, err := persist.Build(e.Build)
	if err != nil {
		return nil, err
	}
	return plan, e.loadPersistent(p)
}

// LoadPersistentLoop is LoadPersistent for a program that runs steps
// decode steps per launch (persist.BuildLoop): it also allocates the token
// history the device appends tokens' buffer to after every step (History).
// The graph must be a device-loop graph: the steps take no host input. On
// a chip mesh (OpenChip) the program is the one `tcc build --persistent
// --device-loop` prints (persist.WithTables), and the tables and images
// buffers the card needs (kir.TablesBuffer, kir.TextBuffer) are allocated
// too, on the simulator as on the chip, for DrivePersistent.
func (e *Executable) LoadPersistentLoop(steps int, tokens *ir.Value) (*persist.Plan, error) {
	p, plan, err := persist.BuildLoop(e.Build, steps, tokens)
	if err != nil {
		return nil, err
	}
	hb, shape, err := persist.HistoryTensor(p, tokens)
	if err != nil {
		return nil, err
	}
	t := Tensor{Buffer: hb, Shape: shape}
	t.Buffer.Name = fmt.Sprintf("b%d/%s", e.Mesh.loads, persist.HistoryBuffer)
	if err := e.Mesh.Alloc(t); err != nil {
		return nil, err
	}
	e.binding[persist.HistoryBuffer] = t.Name
	if e.Mesh.chip != nil {
		if err := persist.WithTables(p, e.Build); err != nil {
			return nil, fmt.Errorf("runtime: %w", err)
		}
	}
	if err := e.loadPersistent(p); err != nil {
		return nil, err
	}
	if e.Mesh.chip != nil {
		for _, name := range []string{kir.TablesBuffer, kir.TextBuffer} {
			b := p.Buffer(name)
			tt := Tensor{Buffer: *b, Shape: persist.CtlShape(*b)}
			tt.Buffer.Name = fmt.Sprintf("b%d/%s", e.Mesh.loads, name)
			if err := e.Mesh.Alloc(tt); err != nil {
				return nil, fmt.Errorf("runtime: the persistent program's %s (%d B per core): %w", name, b.PageSize, err)
			}
			e.binding[name] = tt.Name
		}
	}
	return plan, nil
}

// History reads device dev's token history of the last launch of a
// LoadPersistentLoop program: one row per step, the tokens that step
// wrote (as the tokens value lays them out).
func (e *Executable) History(dev int) ([][]float32, error) {
	name, ok := e.binding[persist.HistoryBuffer]
	if !ok {
		return nil, fmt.Errorf("runtime: no token history (LoadPersistentLoop)")
	}
	data, err := e.Mesh.Download(dev, name)
	if err != nil {
		return nil, err
	}
	t := e.Mesh.tensors[name]
	rows := make([][]float32, t.Pages)
	per := len(data) / t.Pages
	for s := range rows {
		rows[s] = data[s*per : (s+1)*per]
	}
	return rows, nil
}

func (e *Executable) loadPersistent(p *kir.Program) error {
	ctl := p.Buffer(persist.CtlBuffer)
	t := Tensor{Buffer: *ctl, Shape: persist.CtlShape(*ctl)}
	t.Buffer.Name = fmt.Sprintf("b%d/%s", e.Mesh.loads, persist.CtlBuffer)
	if err := e.Mesh.Alloc(t); err != nil {
		return err
	}
	e.binding[persist.CtlBuffer] = t.Name
	e.persistent = p
	return nil
}

// Persistent is the persistent program LoadPersistent built, or nil.
func (e *Executable) Persistent() *kir.Program { return e.persistent }

// OnChip reports whether the executable's mesh drives a chip (OpenChip):
// a multi-step persistent program then runs with DrivePersistent.
func (e *Executable) OnChip() bool { return e.Mesh.chip != nil }

// RunPersistent launches the persistent program once on every device (on
// all devices of each mesh row at once when it has ethernet kernels).
func (e *Executable) RunPersistent() error {
	p := e.persistent
	if p == nil {
		return fmt.Errorf("runtime: no persistent program loaded (LoadPersistent)")
	}
	if e.Mesh.chip != nil {
		return fmt.Errorf("runtime: persistent programs run on the built-in simulator only; the chip backends launch per program")
	}
	if IsCollective(p) {
		if _, err := e.Mesh.launchCollective(p, e.binding); err != nil {
			return fmt.Errorf("runtime: persistent program %s on mesh %s: %w", p.Name, e.Mesh.Shape, err)
		}
		return nil
	}
	for d := 0; d < e.Mesh.Devices(); d++ {
		if _, err := e.Mesh.launch(d, p, e.binding); err != nil {
			return fmt.Errorf("runtime: device %d: persistent program %s: %w", d, p.Name, err)
		}
	}
	return nil
}
