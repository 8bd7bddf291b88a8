package timing

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// Report is the predicted device time of one step of a build (the `tcc
// perf --format json` object and perf.json).
type Report struct {
	Model   string `json:"model"`
	Mesh    string `json:"mesh"`
	Stage   string `json:"stage"`
	Batch   int    `json:"batch"`
	Mode    string `json:"mode"`
	Devices int    `json:"devices"`
	// StepUS is the predicted device time of one step on the slowest
	// device: the sum over its programs of kernel time plus launch gap.
	StepUS float64 `json:"step_us"`
	// DeviceStepUS is the same per device.
	DeviceStepUS []float64 `json:"device_step_us"`
	// FloorUS is the build's physical DRAM floor: FloorBytes / the
	// physical DRAM bandwidth (Params.FloorBytesPerSecond, 512 GB/s).
	FloorUS float64 `json:"floor_us"`
	// StreamFloorUS is FloorBytes at the rate the model predicts for the
	// best DRAM stream (Params.StreamBytesPerSecond): the floor a build
	// could reach under the model.
	StreamFloorUS float64 `json:"stream_floor_us"`
	// FloorBytes is what one device must stream from DRAM per step: every
	// weight once, every persistent state read once and, except KV caches
	// (one row per step), written once; a KV cache only up to the step's
	// last position (its whole tiles of rows), in full without a position.
	FloorBytes int64 `json:"floor_bytes"`
	// Position is the first position the step writes (decode: the
	// position of its token, the last it attends to) and LastPosition the
	// last (prefill: Position + seq - 1); both -1 when the build was
	// predicted without a position (Build.Step).
	Position     int `json:"position"`
	LastPosition int `json:"last_position"`
	// Positions is each user's position in decode (Step.Users, or every
	// user at Position), [Position] in prefill, empty without a position.
	Positions []int `json:"positions"`
	// MaxSeq is the KV cache's length in positions (0: no KV cache
	// known); DefaultPosition says Position is the default (the last).
	MaxSeq          int  `json:"max_seq"`
	DefaultPosition bool `json:"-"`
	// Memory is what the build's buffers occupy in each device's DRAM
	// (absent when not known).
	Memory *Memory `json:"memory,omitempty"`
	// ComputeFloorUS is the build's compute floor (compute_floor.go): its
	// TileProducts (32x32x32) at each program's math fidelity over the
	// worker cores; ComputeRatio is StepUS / ComputeFloorUS.
	ComputeFloorUS float64 `json:"compute_floor_us"`
	TileProducts   int64   `json:"tile_products"`
	ComputeRatio   float64 `json:"compute_ratio"`
	// Ratio is StepUS / FloorUS, StreamRatio StepUS / StreamFloorUS.
	Ratio         float64 `json:"ratio"`
	StreamRatio   float64 `json:"stream_ratio"`
	LaunchUSTotal float64 `json:"launch_us_total"`
	// Programs per device per step and the distinct signatures simulated.
	ProgramsPerDevice int `json:"programs_per_device"`
	Signatures        int `json:"signatures"`
	// FastForwarded counts the programs per device whose time was
	// fast-forwarded from simulations at smaller positions (Predictor,
	// extrapolate.go) rather than simulated at the step's; absent when 0.
	FastForwarded int          `json:"fast_forwarded,omitempty"`
	Kinds         []KindRow    `json:"kinds"`
	Layers        []LayerRow   `json:"layers"`
	Programs      []ProgramRow `json:"programs"`
	// Persistent: the step was predicted as one persistent program
	// (PredictPersistent) of Phases phases; SimulatedSteps is the
	// instructions its one simulation executed.
	Persistent     bool  `json:"persistent,omitempty"`
	Phases         int   `json:"phases,omitempty"`
	SimulatedSteps int64 `json:"simulated_steps,omitempty"`
}

// KindRow aggregates the programs of one op kind on the slowest device.
type KindRow struct {
	Op    string `json:"op"`
	Count int    `json:"count"`
	// Cores is the largest core count of the kind's programs.
	Cores int `json:"cores"`
	// Bytes is the NoC bytes read plus written by all of them.
	Bytes   int64   `json:"bytes"`
	USEach  float64 `json:"us_each"`
	USTotal float64 `json:"us_total"`
	Share   float64 `json:"share"`
	// Critical is the kernel that most often finishes last, and WaitsOn what
	// it stalls on longest.
	Critical string `json:"critical_thread"`
	WaitsOn  string `json:"waits_on"`
}

// LayerRow is one decoder layer (or the embedding / head region) on the slowest device.
type LayerRow struct {
	Index    int     `json:"index"`
	Kind     string  `json:"kind"`
	Programs int     `json:"programs"`
	US       float64 `json:"us"`
}

// ProgramRow is one program on one device.
type ProgramRow struct {
	Device         int     `json:"device"`
	Index          int     `json:"index"`
	Op             string  `json:"op"`
	Layer          int     `json:"layer"`
	Region         string  `json:"region"`
	Cores          int     `json:"cores"`
	BytesRead      int64   `json:"bytes_read"`
	BytesWritten   int64   `json:"bytes_written"`
	DRAMRead       int64   `json:"dram_read"`
	US             float64 `json:"us"`
	CriticalThread string  `json:"critical_thread"`
	WaitsOn        string  `json:"waits_on"`
	MathFidelity   string  `json:"math_fidelity"`
	Signature      string  `json:"signature"`
	Inputs         string  `json:"inputs"`
	Outputs        string  `json:"outputs"`
	// StartUS is the program's start within the step on its device.
	StartUS float64 `json:"start_us"`
	// FastForwarded: US was fast-forwarded from simulations at smaller
	// positions (extrapolate.go), not simulated at the step's.
	FastForwarded bool `json:"fast_forwarded,omitempty"`
	// Threads are the latest-finishing thread of each kernel (for traces
	// and --threads).
	Threads []ThreadTime `json:"-"`
	// LinkBytes and LinkFloorUS are the program's link floor
	// (DeviceTime.LinkBytes, LinkFloorUS; 0 without ethernet), for --threads.
	LinkBytes   int64   `json:"-"`
	LinkFloorUS float64 `json:"-"`
	// Operands and Results are the types of the op's operands and results
	// (for the CSV's INPUT_n_* and OUTPUT_n_* columns).
	Operands, Results []ir.TensorType `json:"-"`
}

// Meta names what a build was made from: MaxSeq is the KV cache's length
// (0: none), DefaultPosition says the step's position (Build.Step) was
// not chosen but the default (the last of the cache).
type Meta struct {
	Model, Stage, Mode string
	Batch, MaxSeq      int
	DefaultPosition    bool
}

// Predict times every program of b on every device of its mesh. Programs
// with the same signature (the same kernels, cores, CBs and arguments up
// to buffer names: layers that differ only in addresses) are simulated
// once. Mesh programs (ethernet kernels) run on the devices of a mesh row
// together; every other program is the same on every device.
func Predict(b *Build, prm *Params, meta Meta) (*Report, error) {
	return NewPredictor(prm).Predict(b, meta)
}

// Predictor predicts builds with one set of parameters and keeps every
// program time it simulated: a program whose signature, known contents
// (Buffer.Words), target and device count it has simulated before, in
// this build or an earlier one, is not simulated again. Predicting one
// build at many positions (fromcodegen.BuildAt) thus re-simulates only
// the programs that read the position. A program that reads the position
// and would run more than the budget's instructions there is
// fast-forwarded from two simulations at smaller positions (SetBudget,
// extrapolate.go). A Predictor is not safe for concurrent use.
type Predictor struct {
	prm   *Params
	cache map[string]*ProgramTime
	// simulated counts the programs simulated so far, extrapolated those
	// fast-forwarded (extrapolate.go).
	simulated, extrapolated int
	// budget is SetBudget's instruction budget.
	budget int64
}

// NewPredictor returns a Predictor with parameters prm (nil: Default()).
func NewPredictor(prm *Params) *Predictor {
	if prm == nil {
		prm = Default()
	}
	return &Predictor{prm: prm, cache: map[string]*ProgramTime{}}
}

// Simulated is the number of program simulations the Predictor has run.
func (pr *Predictor) Simulated() int { return pr.simulated }

// Predict is the package's Predict with pr's parameters and program times.
func (pr *Predictor) Predict(b *Build, meta Meta) (*Report, error) {
	if b == nil {
		return nil, fmt.Errorf("timing: nil build")
	}
	prm := pr.prm
	mesh := b.Mesh
	devices := mesh.Devices()
	rowDevices := max(mesh.Cols, 1)
	r := newReport(b, meta)
	known := map[string][]uint32{}
	for _, s := range b.Buffers {
		if s.Words != nil {
			known[s.Name] = s.Words
		}
	}
	used := map[string]bool{}
	times := make([]*ProgramTime, len(b.Programs))
	sigs := make([]string, len(b.Programs))
	for i, p := range b.Programs {
		sig := Signature(p.Kernel)
		sigs[i] = sig
		n := 1
		if IsMesh(p.Kernel) {
			n = rowDevices
		}
		// Programs of one signature reading different known contents differ.
		key, pt, err := pr.timeProgram(p, b.Target, n, sig, known, b.Step)
		if err != nil {
			return nil, fmt.Errorf("timing: %s: %w", p.Op.Where(), err)
		}
		used[key] = true
		times[i] = pt
		if pt.From != nil {
			r.FastForwarded++
		}
	}
	r.Signatures = len(used) // distinct runs: signatures, with their known contents
	for d := 0; d < devices; d++ {
		at := 0.0
		for i, p := range b.Programs {
			pt := times[i]
			dt := pt.Devices[0]
			if len(pt.Devices) > 1 {
				dt = pt.Devices[(d%rowDevices)%len(pt.Devices)]
			}
			crit, wait := describe(dt.Critical)
			row := ProgramRow{Device: d, Index: i, Op: p.Op.Name(), Layer: regionIndex(p.Op), Region: regionKind(p.Op), Cores: dt.Cores,
				BytesRead: dt.BytesRead, BytesWritten: dt.BytesWritten, DRAMRead: dt.DRAMRead, US: round3(dt.US),
				CriticalThread: crit, WaitsOn: wait, MathFidelity: fidelity(p.Kernel), Signature: sigs[i],
				Inputs: shapes(p.Op.Operands), Outputs: shapes(p.Op.Results), StartUS: round3(at), Threads: dt.Kernels,
				LinkBytes: dt.LinkBytes, LinkFloorUS: dt.LinkFloorUS,
				Operands: tensorTypes(p.Op.Operands), Results: tensorTypes(p.Op.Results), FastForwarded: pt.From != nil}
			r.Programs = append(r.Programs, row)
			at += dt.US + prm.LaunchGapUS
		}
		r.DeviceStepUS[d] = round3(at)
	}
	r.LaunchUSTotal = round3(float64(len(b.Programs)) * prm.LaunchGapUS)
	return r, r.finish(b, prm)
}

// finish sets the step (the slowest device's), the floors and ratios, and
// the aggregates of a report whose DeviceStepUS and Programs are set.
func (r *Report) finish(b *Build, prm *Params) error {
	slow := r.slowest()
	r.StepUS = r.DeviceStepUS[slow]
	r.FloorBytes = floorBytes(b)
	r.FloorUS = round3(float64(r.FloorBytes) / prm.FloorBytesPerSecond * 1e6)
	stream, err := prm.StreamBytesPerSecond(b.Target)
	if err != nil {
		return err
	}
	r.StreamFloorUS = round3(float64(r.FloorBytes) / stream * 1e6)
	if r.FloorUS > 0 {
		r.Ratio = round3(r.StepUS / r.FloorUS)
		r.StreamRatio = round3(r.StepUS / r.StreamFloorUS)
	}
	cf, products := ComputeFloor(b, prm)
	r.ComputeFloorUS, r.TileProducts = round3(cf), products
	if cf > 0 {
		r.ComputeRatio = round3(r.StepUS / cf)
	}
	r.aggregate(slow)
	return nil
}

func regionIndex(op *ir.Op) int {
	if op.Region == nil {
		return -1
	}
	return op.Region.Index
}

func regionKind(op *ir.Op) string {
	if op.Region == nil {
		return ""
	}
	return string(op.Region.Kind)
}

func round3(x float64) float64 {
	if x < 0 {
		return -round3(-x)
	}
	return float64(int64(x*1000+0.5)) / 1000
}

// describe names a thread as "kernel@core" and its longest stall.
func describe(t ThreadTime) (string, string) {
	w, _ := t.TopWait()
	return fmt.Sprintf("%s@%s", t.Kernel, t.Core), w
}

func fidelity(p *kir.Program) string {
	for _, k := range p.Kernels {
		if k.Role == kir.RoleCompute {
			return strings.ToUpper(k.Compute.MathFidelity.String())
		}
	}
	return ""
}

func shapes(vs []*ir.Value) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.Type.Shape.String() + " " + v.Type.DType.String()
	}
	return strings.Join(parts, "; ")
}

// floorBytes is what one device must stream from DRAM per step (see
// Report.FloorBytes). A weight that only embedding lookups read counts the
// rows they gather (the bytes of their results), not the whole table. A
// KV cache counts the rows up to the step's last position in whole tiles
// as they are read (kvBytes).
func floorBytes(b *Build) int64 { return FloorBytesAt(b, b.Step) }

// FloorBytesAt is what one device must stream from DRAM for a step at
// step (nil: without a position, every KV cache in full), as
// Report.FloorBytes counts it; one Build serves every step of a prompt.
func FloorBytesAt(b *Build, step *Step) int64 {
	gathered := map[*ir.Value]int64{}
	other := map[*ir.Value]bool{}
	for _, p := range b.Programs {
		for _, v := range p.Op.Operands {
			if v.Kind != ir.KindWeight {
				continue
			}
			if !strings.Contains(p.Op.Name(), "embedding") {
				other[v] = true
				continue
			}
			// The gathered rows are the result's own bytes: its buffer may
			// be a shared one (codegen's liveness reuse) sized to a larger
			// value, or held by another value.
			for _, r := range p.Op.Results {
				if ps, pages, err := r.Type.PageLayout(); err == nil {
					gathered[v] += int64(ps) * int64(pages)
				}
			}
		}
	}
	var n int64
	for _, s := range b.Buffers {
		if !s.Mem.Kind.IsDRAM() || s.Value == nil {
			continue
		}
		bytes := int64(s.PageSize) * int64(s.Pages)
		switch s.Value.Kind {
		case ir.KindWeight:
			if g, ok := gathered[s.Value]; ok && !other[s.Value] {
				bytes = min(bytes, g)
			}
			n += bytes
		case ir.KindState:
			if s.KV {
				n += kvBytes(s, step)
				continue
			}
			n += 2 * bytes
		}
	}
	return n
}

// kvBytes is what a step at st reads of KV cache s ([B, kv heads, L, D]):
// the rows 0 .. st.Last() of every user and head, in whole tiles of 32
// rows for a tiled cache (ceil((last+1)/32) of its ceil(L/32) tile rows),
// all of it without a position.
func kvBytes(s Buffer, st *Step) int64 {
	bytes := int64(s.PageSize) * int64(s.Pages)
	shape := s.Value.Type.Shape
	if st == nil || shape.Rank() != 4 {
		return bytes
	}
	l := int64(shape[2])
	rowsOf := func(last int) int64 {
		rows := int64(last + 1)
		if s.Value.Type.Layout == ir.TileLayout {
			rows = (rows + ir.TileSize - 1) / ir.TileSize
		}
		return rows
	}
	if s.Value.Type.Layout == ir.TileLayout {
		l = (l + ir.TileSize - 1) / ir.TileSize
	}
	if l <= 0 {
		return bytes
	}
	if B := shape[0]; st.Users != nil && len(st.Users) == B {
		// user b's share of the cache, up to its own position
		var n int64
		for _, p := range st.Users {
			n += bytes / int64(B) / l * min(rowsOf(p), l)
		}
		return n
	}
	rows := rowsOf(st.Last())
	if rows >= l {
		return bytes
	}
	return bytes / l * rows
}

// aggregate fills Kinds and Layers from device dev's programs.
func (r *Report) aggregate(dev int) {
	kinds := map[string]*KindRow{}
	crits := map[string]map[string]int{}
	waits := map[string]map[string]int{}
	var order []string
	layers := map[[2]string]*LayerRow{}
	var lorder [][2]string
	for _, p := range r.Programs {
		if p.Device != dev {
			continue
		}
		k, ok := kinds[p.Op]
		if !ok {
			k = &KindRow{Op: p.Op}
			kinds[p.Op] = k
			crits[p.Op] = map[string]int{}
			waits[p.Op] = map[string]int{}
			order = append(order, p.Op)
		}
		k.Count++
		k.Cores = max(k.Cores, p.Cores)
		k.Bytes += p.BytesRead + p.BytesWritten
		k.USTotal += p.US
		crits[p.Op][kernelOf(p.CriticalThread)]++
		if p.WaitsOn != "" {
			waits[p.Op][p.WaitsOn]++
		}
		key := [2]string{fmt.Sprint(p.Layer), p.Region}
		l, ok := layers[key]
		if !ok {
			l = &LayerRow{Index: p.Layer, Kind: p.Region}
			layers[key] = l
			lorder = append(lorder, key)
		}
		l.Programs++
		l.US += p.US
	}
	for _, op := range order {
		k := kinds[op]
		k.USEach = round3(k.USTotal / float64(k.Count))
		k.USTotal = round3(k.USTotal)
		if r.StepUS > 0 {
			k.Share = round3(k.USTotal / r.StepUS)
		}
		k.Critical, k.WaitsOn = mostCommon(crits[op]), mostCommon(waits[op])
		r.Kinds = append(r.Kinds, *k)
	}
	sort.SliceStable(r.Kinds, func(i, j int) bool { return r.Kinds[i].USTotal > r.Kinds[j].USTotal })
	for _, key := range lorder {
		l := layers[key]
		l.US = round3(l.US)
		r.Layers = append(r.Layers, *l)
	}
}

func kernelOf(thread string) string {
	if i := strings.IndexByte(thread, '@'); i >= 0 {
		return thread[:i]
	}
	return thread
}

func mostCommon(m map[string]int) string {
	best, n := "", 0
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if m[k] > n {
			best, n = k, m[k]
		}
	}
	return best
}

// Signature is a content hash of p up to buffer names: two programs with
// the same signature run the same statements on the same cores with the
// same CBs, semaphores, buffer layouts and argument values (buffer
// addresses abstracted to the buffer's position), so they take the same time.
func Signature(p *kir.Program) string {
	h := sha256.New()
	index := map[string]int{}
	for i, b := range p.Buffers {
		index[b.Name] = i
		fmt.Fprintf(h, "buf %d %v %v %v %d %d\n", i, b.Mem, b.DType, b.Layout, b.PageSize, b.Pages)
	}
	for _, cb := range p.CBs {
		back := -1
		if cb.Backing != "" {
			back = index[cb.Backing]
		}
		fmt.Fprintf(h, "cb %d %d %d %v %v %d\n", cb.Index, cb.PageSize, cb.Pages, cb.Format, cb.Cores, back)
	}
	for _, s := range p.Semaphores {
		fmt.Fprintf(h, "sem %d %v %d\n", s.ID, s.Cores, s.Initial)
	}
	// An argument value in fixed-width fields (not fmt's %#v: a step's
	// runtime values are hundreds of thousands): kind, constant, the
	// buffer's position (or its name's length and bytes), core.
	var word []byte
	val := func(v kir.ArgValue) {
		word = append(word[:0], byte(v.Kind))
		word = binary.LittleEndian.AppendUint32(word, v.Const)
		if v.Kind == kir.ValBufferAddr {
			word = binary.LittleEndian.AppendUint64(word, uint64(index[v.Buffer]))
		} else {
			word = binary.LittleEndian.AppendUint64(word, uint64(len(v.Buffer)))
			word = append(word, v.Buffer...)
		}
		word = binary.LittleEndian.AppendUint64(word, uint64(v.Core.X))
		word = binary.LittleEndian.AppendUint64(word, uint64(v.Core.Y))
		h.Write(word)
	}
	for _, k := range p.Kernels {
		fmt.Fprintf(h, "kernel %d %d %d %v %#v %v\n", k.Role, k.Processor, k.NoC, k.Cores, k.Compute, k.SortedDefines())
		for _, a := range k.Args {
			fmt.Fprintf(h, "arg %s %d %d ", a.Name, a.Kind, a.Index)
			val(a.Value)
		}
		for _, rv := range k.RuntimeValues {
			fmt.Fprintf(h, "rt %d %d %d", rv.Core.X, rv.Core.Y, len(rv.Values))
			for _, v := range rv.Values {
				val(v)
			}
		}
		fmt.Fprintf(h, "body %#v\n", k.Body)
	}
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:8])
}

// newReport is the report of b's step before any program is timed.
func newReport(b *Build, meta Meta) *Report {
	mesh := b.Mesh
	devices := mesh.Devices()
	r := &Report{Model: meta.Model, Mesh: mesh.String(), Stage: meta.Stage, Batch: meta.Batch, Mode: meta.Mode,
		Devices: devices, ProgramsPerDevice: len(b.Programs), DeviceStepUS: make([]float64, devices),
		Position: -1, LastPosition: -1, Memory: b.Memory, MaxSeq: meta.MaxSeq, DefaultPosition: meta.DefaultPosition}
	r.Positions = []int{}
	if b.Step != nil {
		r.Position, r.LastPosition = b.Step.Pos, b.Step.Last()
		switch {
		case b.Step.Users != nil:
			r.Positions = slices.Clone(b.Step.Users)
		case meta.Mode == "prefill":
			r.Positions = []int{b.Step.Pos}
		default:
			for range max(meta.Batch, 1) {
				r.Positions = append(r.Positions, b.Step.Pos)
			}
		}
	}
	return r
}
