package qwen27b

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models/config"
	"github.com/tcc-dev/tcc/models/nn"
)

// Names of the device-loop decode step's state and tables (BuildGraph).
const (
	LoopTokens   = "state.tokens"
	LoopPos      = "state.pos"
	RopeCosTable = "rope.cos_table"
	RopeSinTable = "rope.sin_table"
)

// Part names charged outside the mixers (see nn.Tally).
const (
	PartInputNorm = "input_norm"
	PartPostNorm  = "post_norm"
	PartResidual  = "residual" // the two residual adds and the MLP's all_gather
	PartMLP       = "mlp"
)

// LayerCount is the op count of one decoder layer, split by part.
type LayerCount struct {
	Index int
	Kind  config.LayerKind
	// Mixer is the GDN or attention mixer, including its in- and
	// out-projections and its all_reduce.
	Mixer int
	// MLP is the SwiGLU MLP including its reduce_scatter.
	MLP int
	// NormResidual is the two decoder RMSNorms, the two residual adds and
	// the all_gather that makes the MLP output whole again.
	NormResidual int
	// Parts is every part in emission order (the mixer's parts are those
	// of nn.GDNDecode or nn.GatedAttentionDecode).
	Parts []nn.Part
}

// Total is the layer's op count.
func (l LayerCount) Total() int { return l.Mixer + l.MLP + l.NormResidual }

// Counts are a graph's op counts per region.
type Counts struct {
	Embed, Head int
	Layers      []LayerCount
}

// Total is the graph's op count.
func (c *Counts) Total() int {
	n := c.Embed + c.Head
	for _, l := range c.Layers {
		n += l.Total()
	}
	return n
}

// Prefix is the HF checkpoint prefix of the text model.
const Prefix = "model.language_model."

// LayerPrefix is the checkpoint prefix of decoder layer i.
func LayerPrefix(i int) string { return fmt.Sprintf("%slayers.%d.", Prefix, i) }

// StateName is the name prefix of layer i's persistent state.
func StateName(i int) string { return fmt.Sprintf("state.layers.%d", i) }

// Dims are the per-device sizes of a config on a mesh.
type Dims struct {
	Shard config.Shard
	GDN   nn.GDNDims
	Attn  nn.AttnDims
}

// DimsFor returns the per-device sizes for o on a 1xN mesh, or an error
// naming the config field, the mesh and the rule when the model cannot be
// split over it.
func DimsFor(o Options, mesh ir.Mesh) (Dims, error) {
	if err := o.Check(); err != nil {
		return Dims{}, err
	}
	if mesh.Rows != 1 || mesh.Cols < 1 {
		return Dims{}, fmt.Errorf("qwen27b: mesh %s: only 1xN meshes (tensor parallel over one row of cards) are supported", mesh)
	}
	c := o.Config
	sh, err := c.Shard(mesh.Cols)
	if err != nil {
		return Dims{}, fmt.Errorf("qwen27b: %w", err)
	}
	stateDT := ir.FP32
	if c.MambaSSMDType != "float32" {
		stateDT = ir.BF16 // float16 has no Blackhole format; bf16 stands in
	}
	d := Dims{
		Shard: sh,
		GDN: nn.GDNDims{
			Batch: o.Batch, Hidden: c.HiddenSize,
			KeyHeads: sh.LinearKeyHeads, ValueHeads: sh.LinearValueHeads,
			KeyDim: c.LinearKeyHeadDim, ValueDim: c.LinearValueHeadDim,
			ConvKernel: c.LinearConvKernelDim, StateDType: stateDT, Eps: c.RMSNormEps,
		},
		Attn: nn.AttnDims{
			Batch: o.Batch, Hidden: c.HiddenSize,
			Heads: sh.AttentionHeads, KVHeads: sh.KVHeads, HeadDim: c.HeadDim,
			RotaryDim: c.RotaryDim(), MaxSeq: o.MaxSeq, Eps: c.RMSNormEps,
		},
	}
	if err := d.GDN.Check(); err != nil {
		return Dims{}, fmt.Errorf("qwen27b: mesh %s: %w", mesh, err)
	}
	if err := d.Attn.Check(); err != nil {
		return Dims{}, fmt.Errorf("qwen27b: mesh %s: %w", mesh, err)
	}
	if !c.AttnOutputGate {
		return Dims{}, fmt.Errorf("qwen27b: attn_output_gate false is not supported (the gated attention mixer needs the gate half of q_proj)")
	}
	if c.TieWordEmbeddings {
		return Dims{}, fmt.Errorf("qwen27b: tie_word_embeddings true is not supported (lm_head is a separate weight)")
	}
	return d, nil
}

// BuildGraph builds the verified per-device unfused graph of one step of o
// on mesh, with its op counts per layer and part. Errors name the mesh,
// the config field and the rule; nothing panics on bad options.
//
// Decode: inputs "tokens" [B] uint32, "pos" [B] uint32 (user b's position
// pos[b]; users may be at different positions) and "rope.cos",
// "rope.sin" [B, rotary dim] bf16 (RopeTables: row b for pos[b]); prefill:
// "tokens" [B, S], "pos" [1] (the first new position of every user) and "rope.cos", "rope.sin" [S, 1, rotary
// dim] (RopePrefillTables). Outputs: the logits of each user's last token
// [B, 1, vocab] (each device's vocab shard, split over the devices and
// joined on the host (ir.Dist.Join); gathered on the devices only when the
// vocab is padded) and the greedy next token [B, 1, 1] uint32.
//
// Decode with o.DeviceLoop takes no input: the tokens are state
// LoopTokens [B, 1, 1] uint32 that the step's greedy next tokens replace
// in place, the positions are state LoopPos [B] uint32 that the step
// advances by one (an add_scalar at its end), and the RoPE rows are
// gathered by position from the weights RopeCosTable and RopeSinTable
// [MaxSeq, rotary dim] bf16 (RopeTableRows). The host writes both states
// once, before the first such step (LoopState).
func BuildGraph(o Options, mesh ir.Mesh) (*ir.Graph, *Counts, error) {
	d, err := DimsFor(o, mesh)
	if err != nil {
		return nil, nil, err
	}
	b, counts := build(o, d, mesh)
	graph, err := b.Finish()
	if err != nil {
		return nil, nil, fmt.Errorf("qwen27b: mesh %s: %w", mesh, err)
	}
	return graph, counts, nil
}

// build emits the step (decode or prefill); errors stay in the builder.
func build(o Options, d Dims, mesh ir.Mesh) (*ir.Builder, *Counts) {
	c := o.Config
	tp := nn.TP{Devices: mesh.Cols}
	b := ir.NewBuilder("qwen27b")
	b.G.Mesh = mesh
	H, B, eps := c.HiddenSize, o.Batch, c.RMSNormEps
	prefill := o.Mode == Prefill
	counts := &Counts{}

	tokT := ir.TensorType{Shape: ir.Shape{B}, DType: ir.UInt32, Layout: ir.RowMajorLayout, Mem: ir.DRAM, Dist: ir.Replicated}
	if prefill {
		tokT.Shape = ir.Shape{B, o.Seq}
	}
	loop := o.Loop()
	var tokens, pos *ir.Value
	if loop {
		// One token per user, in the argmax's [B, 1, 1] so the step's
		// next tokens are written into this state in place.
		tokT.Shape = ir.Shape{B, 1, 1}
		tokens = b.State(LoopTokens, tokT)
	} else {
		tokens = b.Input("tokens", tokT)
	}
	var rope nn.Rope
	if len(c.AttentionLayers()) > 0 {
		switch {
		case prefill:
			rope = nn.DeclareRopePrefill(b, o.Seq, c.RotaryDim())
		case loop:
			pos = b.State(LoopPos, ir.TensorType{Shape: ir.Shape{B}, DType: ir.UInt32, Layout: ir.RowMajorLayout, Mem: ir.DRAM, Dist: ir.Replicated})
		default:
			rope = nn.DeclareRope(b, B, c.RotaryDim())
		}
	}
	embed := b.Weight(Prefix+"embed_tokens.weight", ir.T(ir.BF16, c.VocabSize, H))
	hvec := func(name string) *ir.Value { return b.Weight(name, ir.T(ir.BF16, H)) }

	b.Region("embed", -1)
	if pos != nil {
		tab := ir.T(ir.BF16, o.MaxSeq, c.RotaryDim())
		rope = nn.RopeFromTables(b, pos, b.Weight(RopeCosTable, tab), b.Weight(RopeSinTable, tab))
	}
	h := b.Embedding(tokens, embed) // [B,S,H] in prefill, [B,1,1,H] in the device loop
	if !prefill {
		h = b.Reshape(h, []int{B, 1, H})
	}
	counts.Embed = b.G.NumOps()

	for i, kind := range c.Layers {
		p := LayerPrefix(i)
		inNorm := hvec(p + "input_layernorm.weight")
		postNorm := hvec(p + "post_attention_layernorm.weight")
		var gw nn.GDNWeights
		var gs nn.GDNState
		var aw nn.AttnWeights
		var kv nn.KVCache
		if kind == config.GDN {
			gw = nn.DeclareGDN(b, p, d.GDN, tp)
			gs = nn.DeclareGDNState(b, StateName(i), d.GDN, tp)
		} else {
			aw = nn.DeclareAttention(b, p, d.Attn, tp)
			kv = nn.DeclareKVCacheOf(b, StateName(i), d.Attn, tp, o.KV())
		}
		mw := nn.DeclareMLPDType(b, p, H, d.Shard.IntermediateSize, tp, o.Policy.GateUpDType())

		b.Region(ir.RegionKind(kind.String()), i)
		t := nn.NewTally(b.G)
		ctx := nn.Ctx{B: b, TP: tp, Tally: t}
		x := nn.RMSNorm(b, h, inNorm, eps, 1)
		t.Mark(PartInputNorm)
		var mix *ir.Value
		switch {
		case kind == config.GDN && prefill:
			mix = nn.GDNPrefill(ctx, x, gw, gs, d.GDN)
		case kind == config.GDN:
			mix = nn.GDNDecode(ctx, x, gw, gs, d.GDN)
		case prefill:
			mix = nn.GatedAttentionPrefill(ctx, x, aw, kv, rope, d.Attn)
		default:
			mix = nn.GatedAttentionDecode(ctx, x, aw, kv, rope, d.Attn)
		}
		h = b.Add(h, mix)
		t.Mark(PartResidual)
		x = nn.RMSNorm(b, h, postNorm, eps, 1)
		t.Mark(PartPostNorm)
		y := tp.Gather(b, nn.SwiGLU(ctx, x, mw))
		h = b.Add(h, y)
		t.Mark(PartResidual)
		counts.Layers = append(counts.Layers, layerCount(i, kind, t))
	}

	finalNorm := hvec(Prefix + "norm.weight")
	lmT := ir.T(ir.BFP8B, H, d.Shard.VocabRows)
	lmT.Dist = tp.Split(1)
	lmHead := b.Weight("lm_head.weight", lmT)
	b.Region("head", -1)
	t := nn.NewTally(b.G)
	if prefill && o.Seq > 1 {
		h = b.Slice(h, []int{0, o.Seq - 1, 0}, []int{B, o.Seq, H}) // the last token picks the next one
	}
	shard := b.Matmul(nn.RMSNorm(b, h, finalNorm, eps, 1), lmHead) // [B,1,vocab rows]
	logits := tp.Gather(b, shard)
	out := shard // without padding the logits output is the cards' shards, joined on the host
	if n := logits.Type.Shape[2]; n > c.VocabSize {
		logits = b.Slice(logits, []int{0, 0, 0}, []int{B, 1, c.VocabSize}) // drop the zero padding rows
		out = logits
	}
	next := b.Argmax(logits) // [B,1,1] uint32; argmax(all_gather) fuses to argmax_sharded
	if loop {
		b.UpdateState(tokens, next) // the next step's embedding reads it
		if pos != nil {
			nn.AdvancePos(b, pos)
		}
	}
	b.Output(out, next)
	t.Mark("head")
	counts.Head = t.Sum()
	return b, counts
}

func layerCount(i int, kind config.LayerKind, t *nn.Tally) LayerCount {
	l := LayerCount{Index: i, Kind: kind, Parts: t.Parts}
	for _, p := range t.Parts {
		switch p.Name {
		case PartInputNorm, PartPostNorm, PartResidual:
			l.NormResidual += p.Ops
		case PartMLP:
			l.MLP += p.Ops
		default:
			l.Mixer += p.Ops
		}
	}
	return l
}
