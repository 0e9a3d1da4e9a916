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
		{"units", "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.xlabel('Time (s)')\nplt.ylabel('Mass [kg]')\nplt.show()",
			func(ch map[string]any) bool { return ch["x_unit"] == "s" && ch["y_unit"] == "kg" }},
		{"pie angles rounded", "import matplotlib.pyplot as plt\nplt.pie([90, 10], startangle=90)\nplt.show()",
			func(ch map[string]any) bool {
				els := ch["elements"].([]any)
				return els[0].(map[string]any)["angle"] == 324.0 && els[1].(map[string]any)["angle"] == 36.0
			}},
		{"box and whisker", "import matplotlib.pyplot as plt\n" +
			"plt.boxplot([[85, 90, 78, 92, 88], [95, 89, 76, 91, 84, 87]], labels=['A', 'B'], patch_artist=True)\nplt.show()",
			func(ch map[string]any) bool {
				raw, _ := json.Marshal(ch["elements"])
				return ch["type"] == "box_and_whisker" && string(raw) == `[`+
					`{"first_quartile":85,"label":"A","max":92,"median":88,"min":78,"outliers":[],"third_quartile":90},`+
					`{"first_quartile":84.75,"label":"B","max":95,"median":88,"min":84,"outliers":[76],"third_quartile":90.5}]`
			}},
		{"superchart", "import matplotlib.pyplot as plt\nfig, (a, b) = plt.subplots(1, 2)\na.plot([1, 2])\nb.bar(['x'], [1])\nplt.show()",
			func(ch map[string]any) bool { return ch["type"] == "superchart" && len(ch["elements"].([]any)) == 2 }},
	}
	// A PIL image saved to a file is shown too.
	if err := exec.Command(debianPython, "-c", "import PIL").Run(); err == nil {
		e := c.execute(map[string]any{"code": "import os, tempfile\nfrom PIL import Image\n" +
			"Image.new('RGB', (4, 4)).save(os.path.join(tempfile.mkdtemp(), 'a.png'))"})
		if len(e.results) != 1 || e.results[0].PNG == "" || e.err != nil {
			t.Errorf("saving a PIL image: results %+v error %+v, want one png", e.results, e.err)
		}
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
