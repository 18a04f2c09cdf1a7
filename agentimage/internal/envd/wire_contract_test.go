package envd

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/filesystem"
	"github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/process"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestWireContractMatchesSDK checks that our spec/*.proto describe exactly the wire contract the installed npm e2b
// SDK speaks: testdata/sdk_descriptors.cjs pulls the FileDescriptorProtos the SDK compiled in, and every service,
// method (path, streaming, input/output types), message, field (number, kind, cardinality, oneof, presence, JSON
// name, referenced type) and enum value must be the same on both sides. Comments and declaration order are ours
// and do not matter; any rename, renumbering or retyping does.
func TestWireContractMatchesSDK(t *testing.T) {
	sdk := sdkDescriptors(t)
	for _, ours := range []protoreflect.FileDescriptor{process.File_process_process_proto, filesystem.File_filesystem_filesystem_proto} {
		t.Run(ours.Path(), func(t *testing.T) {
			theirs, ok := sdk[ours.Path()]
			if !ok {
				t.Fatalf("the e2b SDK has no descriptor for %s (it has %v)", ours.Path(), keys(sdk))
			}
			want, got := contract(theirs), contract(ours)
			if len(want) < 20 {
				t.Fatalf("the SDK's contract for %s has only %d entries: extraction is broken", ours.Path(), len(want))
			}
			for k, w := range want {
				switch g, ok := got[k]; {
				case !ok:
					t.Errorf("missing from our spec: %s %s", k, w)
				case g != w:
					t.Errorf("%s: ours %q, the SDK's %q", k, g, w)
				}
			}
			for k, g := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("not in the SDK's contract: %s %s", k, g)
				}
			}
		})
	}
}

// sdkDescriptors runs testdata/sdk_descriptors.cjs against the repository's node_modules and returns the SDK's
// envd file descriptors by proto path. A checkout without node_modules installs them (an integration step).
func sdkDescriptors(t *testing.T) map[string]protoreflect.FileDescriptor {
	t.Helper()
	mods := filepath.Join(testenv.RepoRoot(), "node_modules")
	if _, err := os.Stat(filepath.Join(mods, "e2b", "package.json")); err != nil {
		mods = testenv.NodeModules(t)
	} else if _, err := exec.LookPath("node"); err != nil {
		mods = testenv.NodeModules(t)
	}
	cmd := exec.Command("node", filepath.Join("testdata", "sdk_descriptors.cjs"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("extracting the e2b SDK's descriptors: %v", err)
	}
	var res struct {
		Version string `json:"version"`
		Files   map[string]struct {
			Desc    string   `json:"desc"`
			Imports []string `json:"imports"`
		} `json:"files"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("decoding sdk_descriptors.cjs output: %v", err)
	}
	t.Logf("npm e2b %s: descriptors %v", res.Version, keys(res.Files))
	files := map[string]protoreflect.FileDescriptor{}
	for name, f := range res.Files {
		// protobuf-es embeds the descriptors unpadded.
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(f.Desc, "="))
		if err != nil {
			t.Fatalf("%s: base64: %v", name, err)
		}
		fdp := new(descriptorpb.FileDescriptorProto)
		if err := proto.Unmarshal(raw, fdp); err != nil {
			t.Fatalf("%s: FileDescriptorProto: %v", name, err)
		}
		// protobuf-es strips the imports from the embedded bytes; the script read them from fileDesc's arguments.
		if len(fdp.Dependency) == 0 {
			fdp.Dependency = f.Imports
		}
		// Imports (google/protobuf/timestamp.proto) resolve from the Go registry; the file itself is not registered.
		fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
		if err != nil {
			t.Fatalf("%s: building the descriptor: %v", name, err)
		}
		files[name] = fd
	}
	return files
}

// contract flattens what of a file reaches the wire or the generated names into "element -> properties" entries.
func contract(fd protoreflect.FileDescriptor) map[string]string {
	c := map[string]string{}
	var imports []string
	for i := range fd.Imports().Len() {
		imports = append(imports, fd.Imports().Get(i).Path())
	}
	sort.Strings(imports)
	c["file "+fd.Path()] = fmt.Sprintf("package=%s syntax=%s imports=%v", fd.Package(), fd.Syntax(), imports)
	for i := range fd.Services().Len() {
		s := fd.Services().Get(i)
		c["service "+string(s.FullName())] = fmt.Sprintf("methods=%d", s.Methods().Len())
		for j := range s.Methods().Len() {
			m := s.Methods().Get(j)
			c["rpc /"+string(s.FullName())+"/"+string(m.Name())] = fmt.Sprintf("in=%s out=%s client_stream=%t server_stream=%t",
				m.Input().FullName(), m.Output().FullName(), m.IsStreamingClient(), m.IsStreamingServer())
		}
	}
	addEnums(c, fd.Enums())
	addMessages(c, fd.Messages())
	return c
}

func addEnums(c map[string]string, enums protoreflect.EnumDescriptors) {
	for i := range enums.Len() {
		e := enums.Get(i)
		var vals []string
		for j := range e.Values().Len() {
			v := e.Values().Get(j)
			vals = append(vals, fmt.Sprintf("%s=%d", v.Name(), v.Number()))
		}
		sort.Strings(vals)
		c["enum "+string(e.FullName())] = strings.Join(vals, " ")
	}
}

func addMessages(c map[string]string, msgs protoreflect.MessageDescriptors) {
	for i := range msgs.Len() {
		m := msgs.Get(i)
		var oneofs []string
		for j := range m.Oneofs().Len() {
			o := m.Oneofs().Get(j)
			oneofs = append(oneofs, fmt.Sprintf("%s(synthetic=%t)", o.Name(), o.IsSynthetic()))
		}
		sort.Strings(oneofs)
		c["message "+string(m.FullName())] = fmt.Sprintf("map_entry=%t fields=%d oneofs=%v", m.IsMapEntry(), m.Fields().Len(), oneofs)
		for j := range m.Fields().Len() {
			f := m.Fields().Get(j)
			c["field "+string(f.FullName())] = fieldContract(f)
		}
		addEnums(c, m.Enums())
		addMessages(c, m.Messages())
	}
}

func fieldContract(f protoreflect.FieldDescriptor) string {
	ref := ""
	switch {
	case f.Message() != nil:
		ref = string(f.Message().FullName())
	case f.Enum() != nil:
		ref = string(f.Enum().FullName())
	}
	oneof := ""
	if o := f.ContainingOneof(); o != nil {
		oneof = string(o.Name())
	}
	return fmt.Sprintf("number=%d kind=%s type=%s cardinality=%s list=%t map=%t oneof=%s presence=%t optional_keyword=%t json=%s",
		f.Number(), f.Kind(), ref, f.Cardinality(), f.IsList(), f.IsMap(), oneof, f.HasPresence(), f.HasOptionalKeyword(), f.JSONName())
}

func keys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
