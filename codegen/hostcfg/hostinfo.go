package hostcfg

// HostInfo is what only the model knows about running a build: how each
// per-step input is filled and which checkpoint tensor each weight is cut
// from. Models that implement it (the CLI passes them to codegen's Build.FilesWith) get a
// complete I/O manifest; without it inputs say "host data" and weights
// name only their buffer.
type HostInfo interface {
	// InputFill describes how the host fills graph input name each step.
	InputFill(name string) string
	// WeightSource is the checkpoint tensor weight name is cut from on a
	// mesh of devices columns.
	WeightSource(name string, devices int) (WeightSource, error)
}

// WeightSource says how a converter makes one device's weight buffer from
// a checkpoint tensor: take Tensor, transpose it when Transposed (HF
// stores linear weights [out, in]; tcc's are [in, out]; the GDN conv1d
// [C, 1, K] becomes [K, C]), append Pad zeros along Axis, cut Axis into
// Parts pieces per block of Blocks (one block when empty) and keep the
// device's piece of every block (device d of n holds part d*Parts/n),
// then convert to the buffer's dtype and layout. Axis -1: replicated.
type WeightSource struct {
	Tensor     string `json:"tensor"`
	Transposed bool   `json:"transposed"`
	Axis       int    `json:"axis"`
	Parts      int    `json:"parts,omitempty"`
	Blocks     []int  `json:"blocks,omitempty"`
	Pad        int    `json:"pad,omitempty"`
	// Computed, when set, says how the host computes the weight instead
	// of reading Tensor from the checkpoint (e.g. the device loop's RoPE
	// tables).
	Computed string `json:"computed,omitempty"`
}

// StateIniter is implemented by a HostInfo whose model has state the host
// initialises with something other than zeros (e.g. the device loop's
// tokens and positions, written once before the first step).
type StateIniter interface {
	// StateInit describes how the host initialises state name, or ""
	// for zeros.
	StateInit(name string) string
}
