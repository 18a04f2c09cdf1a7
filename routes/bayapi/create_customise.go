package bayapi

import (
	"encoding/json"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// dependencies reads the create body's optional `dependencies` ({python: {name: version}, node: {name: range},
// r: {name: version}}) and
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
		f.issue("model_type", f.loc("dependencies"), "Input should be {python: {name: version}, node: {name: range}, r: {name: version}}", v, nil)
		return nil
	}
	env, err := service.DependenciesEnv(&d) // ops.go: the same rules for every dialect
	if err != nil {
		f.issue("value_error", f.loc("dependencies"), service.AsError(err).Message, v, nil)
		return nil
	}
	return env
}
