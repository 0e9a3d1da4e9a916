package codeinterp

import (
	"encoding/json"
	"os/exec"
	"testing"
)

func TestPythonCharts(t *testing.T) {
	t.Parallel()
	requireIPyKernel(t)
	if err := exec.Command(debianPython, "-c", "import matplotlib").Run(); err != nil {
		t.Skipf("skipping: %s lacks matplotlib: %v", debianPython, err)
	}
	c := realServer(t, Config{})
	tests := []struct {
		name, code string
		check      func(chart map[string]any) bool
	}{
		{"line", "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 5, 6], label='s')\nplt.title('T')\nplt.xlabel('x')\nplt.show()",
			func(ch map[string]any) bool {
				el := ch["elements"].([]any)[0].(map[string]any)
				return ch["type"] == "line" && ch["title"] == "T" && ch["x_label"] == "x" && el["label"] == "s" &&
					len(el["points"].([]any)) == 3 && ch["x_scale"] == "linear"
			}},
		{"bar", "import matplotlib.pyplot as plt\nplt.bar(['a', 'b'], [3, 4])\nplt.show()",
			func(ch map[string]any) bool {
				els := ch["elements"].([]any)
				e1 := els[1].(map[string]any)
				return ch["type"] == "bar" && len(els) == 2 && e1["label"] == "b" && e1["value"] == 4.0
			}},
		{"scatter", "import matplotlib.pyplot as plt\nplt.scatter([1, 2], [3, 4])\nplt.yscale('log')\nplt.show()",
			func(ch map[string]any) bool {
				return ch["type"] == "scatter" && ch["y_scale"] == "log" && len(ch["elements"].([]any)) == 1
			}},
		{"pie", "import matplotlib.pyplot as plt\nplt.pie([1, 3], labels=['a', 'b'])\nplt.show()",
			func(ch map[string]any) bool {
				el := ch["elements"].([]any)[1].(map[string]any)
				return ch["type"] == "pie" && el["label"] == "b" && el["angle"] == 270.0
			}},
		{"superchart", "import matplotlib.pyplot as plt\nfig, (a, b) = plt.subplots(1, 2)\na.plot([1, 2])\nb.bar(['x'], [1])\nplt.show()",
			func(ch map[string]any) bool { return ch["type"] == "superchart" && len(ch["elements"].([]any)) == 2 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := c.execute(map[string]any{"code": tt.code})
			if len(e.results) != 1 || e.results[0].PNG == "" {
				t.Fatalf("results %+v error %+v", e.results, e.err)
			}
			raw, _ := json.Marshal(e.results[0].Chart)
			chart, _ := e.results[0].Chart.(map[string]any)
			if chart == nil || !tt.check(chart) {
				t.Fatalf("chart %s", raw)
			}
		})
	}
}
