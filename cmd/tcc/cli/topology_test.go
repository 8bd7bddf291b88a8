package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
)

// TestTopologyBuild: --topology p300 plans the ring over the P300's links
// and programs.json records the topology, the physical links and each
// chip's ring channels; the default build records p150a and no ports.
func TestTopologyBuild(t *testing.T) {
	for _, tc := range []struct {
		topology string
		links    []codegen.EthLink
		ports    []codegen.RingPorts
	}{
		{
			topology: "p150a",
			links: []codegen.EthLink{
				{DeviceA: 0, ChannelA: 0, DeviceB: 1, ChannelB: 1}, {DeviceA: 0, ChannelA: 2, DeviceB: 1, ChannelB: 3},
				{DeviceA: 1, ChannelA: 0, DeviceB: 0, ChannelB: 1}, {DeviceA: 1, ChannelA: 2, DeviceB: 0, ChannelB: 3},
			},
		},
		{
			topology: "p300",
			links:    []codegen.EthLink{{DeviceA: 0, ChannelA: 2, DeviceB: 1, ChannelB: 9}, {DeviceA: 1, ChannelA: 8, DeviceB: 0, ChannelB: 3}},
			ports:    []codegen.RingPorts{{Device: 0, East: []int{2}, West: []int{3}}, {Device: 1, East: []int{8}, West: []int{9}}},
		},
	} {
		t.Run(tc.topology, func(t *testing.T) {
			dir := t.TempDir()
			out, err := runCLI(t, "build", "qwen27b", "--config", smallConfig, "--mesh", "1x2", "--topology", tc.topology, "-o", dir)
			require.NoError(t, err, out)
			data, err := os.ReadFile(filepath.Join(dir, "programs.json"))
			require.NoError(t, err)
			var pf codegen.ProgramsFile
			require.NoError(t, json.Unmarshal(data, &pf))
			if pf.Topology != tc.topology {
				t.Errorf("topology %q, want %q", pf.Topology, tc.topology)
			}
			if diff := cmp.Diff(tc.links, pf.Ethernet); diff != "" {
				t.Errorf("ethernet (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.ports, pf.RingPorts); diff != "" {
				t.Errorf("ring_ports (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTopologyErrors: an unknown topology or a mesh it does not cable
// fails before anything is built, naming the topology and the mesh.
func TestTopologyErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"build unknown", []string{"build", "qwen27b", "--config", smallConfig, "--mesh", "1x2", "--topology", "p999", "-o", "DIR"}, []string{`unknown topology "p999"`, "p150a, p300"}},
		{"build mesh too large", []string{"build", "qwen27b", "--config", smallConfig, "--mesh", "1x4", "--topology", "p300", "-o", "DIR"}, []string{"p300", "2 chips", "mesh 1x4"}},
		{"perf mesh too large", []string{"perf", "qwen27b", "--config", smallConfig, "--mesh", "1x4", "--topology", "p300"}, []string{"p300", "2 chips", "mesh 1x4"}},
		{"run unknown", []string{"run", "qwen27b", "--config", smallConfig, "--mesh", "1x2", "--topology", "p999", "--steps", "1"}, []string{`unknown topology "p999"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string(nil), tc.args...)
			for i, a := range args {
				if a == "DIR" {
					args[i] = t.TempDir()
				}
			}
			out, err := runCLI(t, args...)
			require.Error(t, err, out)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}
