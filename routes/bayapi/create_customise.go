package bayapi

import (
	"encoding/json"

	"github.com/sandgate/sandgate/sandboxes"
)

// dependencies reads the create body's optional `dependencies` ({python: {name: version}, node: {name: range}}) and
// returns the environment that hands them to the Manager (merged over the profile's there), or nil. Bad names and
// apt packages (which need a derived image) are validation issues.
func (f *fields) dependencies() map[string]string {
	v, ok := f.get("dependencies")
	if !ok || v == nil {
		return nil
	}
	raw, _ := json.Marshal(v) // it came from JSON
	var d sandboxes.Dependencies
	if err := json.Unmarshal(raw, &d); err != nil {
		f.issue("model_type", f.loc("dependencies"), "Input should be {python: {name: version}, node: {name: range}}", v, nil)
		return nil
	}
	if err := d.Validate(); err != nil {
		f.issue("value_error", f.loc("dependencies"), err.Error(), v, nil)
		return nil
	}
	if len(d.Apt) > 0 {
		f.issue("value_error", f.loc("dependencies"), "apt packages cannot be installed at create: the sandbox runs as a non-root "+
			"user on a read-only root filesystem; build a derived image with them (make profile-images) and use it as the profile's image", v, nil)
		return nil
	}
	if len(d.Python)+len(d.Node) == 0 {
		return nil
	}
	b, _ := json.Marshal(d)
	return map[string]string{sandboxes.EnvDependencies: string(b)}
}
