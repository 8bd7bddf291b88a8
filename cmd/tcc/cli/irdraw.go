package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/tcc-dev/tcc/ir"
)

// irFormats are tcc ir's --format values.
var irFormats = []string{"text", "dot", "mermaid"}

// drawNode is one node of a drawn layer: an op of the region, or a value
// it reads from outside (a weight, state, input or another region's
// result), or a result read after the region.
type drawNode struct {
	id    string
	lines []string
	kind  string // "op", "fused", "weight", "state", "input", "result", "out"
}

type drawEdge struct {
	from, to, label string
}

// layerDrawing is region r of g as nodes and edges, in the order the ops
// run (so the output is deterministic).
func layerDrawing(g *ir.Graph, r *ir.Region) ([]drawNode, []drawEdge) {
	var nodes []drawNode
	var edges []drawEdge
	inRegion := map[*ir.Op]bool{}
	for _, op := range r.Ops {
		inRegion[op] = true
	}
	seen := map[*ir.Value]string{} // outside value -> its node
	for _, op := range r.Ops {
		n := drawNode{id: fmt.Sprintf("op%d", op.ID), kind: "op", lines: []string{op.Name()}}
		if op.Rule != "" {
			n.kind = "fused"
			n.lines = append(n.lines, "rule "+op.Rule)
			if op.Decomp != nil {
				n.lines = append(n.lines, fmt.Sprintf("replaces %d ops", len(op.Decomp.Ops)))
			}
		}
		nodes = append(nodes, n)
		for _, v := range op.Operands {
			from := ""
			if v.Def != nil && inRegion[v.Def] {
				from = fmt.Sprintf("op%d", v.Def.ID)
			} else if id, ok := seen[v]; ok {
				from = id
			} else {
				from = fmt.Sprintf("v%d", v.ID)
				seen[v] = from
				nodes = append(nodes, outsideNode(from, v))
			}
			edges = append(edges, drawEdge{from, n.id, typeLabel(v)})
		}
	}
	// Results read after the region: by another region's op, as a graph
	// output or as a state's new value.
	readAfter := map[*ir.Value]string{}
	for _, o := range g.Ops() {
		if inRegion[o] {
			continue
		}
		for _, v := range o.Operands {
			if v.Def != nil && inRegion[v.Def] && readAfter[v] == "" {
				if o.Region != nil {
					readAfter[v] = "to " + o.Region.Label()
				} else {
					readAfter[v] = "read after"
				}
			}
		}
	}
	for _, v := range g.Outputs {
		if v.Def != nil && inRegion[v.Def] {
			readAfter[v] = "graph output"
		}
	}
	for s, v := range g.StateUpdates {
		if v.Def != nil && inRegion[v.Def] {
			readAfter[v] = "new " + s.Name
		}
	}
	for _, op := range r.Ops {
		for _, v := range op.Results {
			if to, ok := readAfter[v]; ok {
				id := fmt.Sprintf("out%d", v.ID)
				nodes = append(nodes, drawNode{id: id, kind: "out", lines: []string{v.String(), to}})
				edges = append(edges, drawEdge{fmt.Sprintf("op%d", op.ID), id, typeLabel(v)})
			}
		}
	}
	return nodes, edges
}

func outsideNode(id string, v *ir.Value) drawNode {
	n := drawNode{id: id, kind: v.Kind.String()}
	switch v.Kind {
	case ir.KindResult:
		from := "from outside"
		if v.Def != nil && v.Def.Region != nil {
			from = "from " + v.Def.Region.Label()
		}
		n.lines = []string{v.String(), from}
	default:
		n.lines = []string{v.Kind.String() + " " + v.Name}
	}
	return n
}

// typeLabel is a value's shape and dtype, e.g. "[1,128] bf16".
func typeLabel(v *ir.Value) string {
	return v.Type.Shape.String() + " " + v.Type.DType.String()
}

// drawLayer writes region r of g as a Graphviz dot or Mermaid flowchart:
// ops as boxes (fused ops filled, labelled with the rule that created them
// and how many ops they replace), the values read from outside the layer
// (weights, state, inputs, other regions' results) and the results read
// after it, edges labelled with shape and dtype.
func drawLayer(w io.Writer, g *ir.Graph, r *ir.Region, stage, format string) error {
	nodes, edges := layerDrawing(g, r)
	title := fmt.Sprintf("%s %s, %s", g.Name, r.Label(), stage)
	var b strings.Builder
	switch format {
	case "dot":
		fmt.Fprintf(&b, "digraph %q {\n", title)
		fmt.Fprintf(&b, "  label=%q;\n  labelloc=t;\n  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=8];\n", title)
		for _, n := range nodes {
			attrs := map[string]string{
				"op":     `shape=box`,
				"fused":  `shape=box, style="rounded,filled", fillcolor="#dbe9ff"`,
				"weight": `shape=note`,
				"state":  `shape=cylinder`,
				"input":  `shape=invhouse`,
				"result": `shape=ellipse, style=dashed`,
				"out":    `shape=ellipse, style=dashed`,
			}[n.kind]
			fmt.Fprintf(&b, "  %s [label=%q, %s];\n", n.id, strings.Join(n.lines, "\n"), attrs)
		}
		for _, e := range edges {
			fmt.Fprintf(&b, "  %s -> %s [label=%q];\n", e.from, e.to, e.label)
		}
		b.WriteString("}\n")
	case "mermaid":
		fmt.Fprintf(&b, "---\ntitle: %s\n---\nflowchart TD\n", title)
		for _, n := range nodes {
			shape := mermaidShapes[n.kind]
			fmt.Fprintf(&b, "  %s%s\"%s\"%s\n", n.id, shape[0], mermaidText(strings.Join(n.lines, "<br/>")), shape[1])
		}
		for _, e := range edges {
			fmt.Fprintf(&b, "  %s -->|\"%s\"| %s\n", e.from, mermaidText(e.label), e.to)
		}
		b.WriteString("  classDef fused fill:#dbe9ff\n")
		var fused []string
		for _, n := range nodes {
			if n.kind == "fused" {
				fused = append(fused, n.id)
			}
		}
		if len(fused) > 0 {
			fmt.Fprintf(&b, "  class %s fused\n", strings.Join(fused, ","))
		}
	default:
		return fmt.Errorf("unknown --format %q (want %s)", format, strings.Join(irFormats, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mermaidShapes are the Mermaid node brackets of each node kind.
var mermaidShapes = map[string][2]string{
	"op":     {"[", "]"},
	"fused":  {"(", ")"},
	"weight": {"[/", "/]"},
	"state":  {"[(", ")]"},
	"input":  {"[\\", "/]"},
	"result": {"([", "])"},
	"out":    {"([", "])"},
}

// mermaidText escapes a label for a quoted Mermaid string.
func mermaidText(s string) string {
	return strings.ReplaceAll(s, `"`, "#quot;")
}
