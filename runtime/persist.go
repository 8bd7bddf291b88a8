package runtime

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/persist"
)

// LoadPersistent builds the persistent program of the executable's build
// (codegen/persist) and allocates its control buffer on every device; Run
// then launches it once per step instead of launching every program.
func (e *Executable) LoadPersistent() (*persist.Plan, error) {
	p, plan, err := persist.Build(e.Build)
	if err != nil {
		return nil, err
	}
	ctl := p.Buffer(persist.CtlBuffer)
	t := Tensor{Buffer: *ctl, Shape: persist.CtlShape(*ctl)}
	t.Buffer.Name = fmt.Sprintf("b%d/%s", e.Mesh.loads, persist.CtlBuffer)
	if err := e.Mesh.Alloc(t); err != nil {
		return nil, err
	}
	e.binding[persist.CtlBuffer] = t.Name
	e.persistent = p
	return plan, nil
}

// Persistent is the persistent program LoadPersistent built, or nil.
func (e *Executable) Persistent() *kir.Program { return e.persistent }

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
