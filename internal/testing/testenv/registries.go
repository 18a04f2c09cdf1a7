package testenv

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Registries is a PyPI "simple" index, an npm registry and a CRAN-like R repository served by the test on the Docker
// bridge's gateway address, each holding one tiny package, so dependency installs need no Internet and exercise the
// mirror settings.
type Registries struct {
	URL    string // http://gateway:port (https:// from StartRegistriesTLS)
	CAFile string // StartRegistriesTLS: the PEM file of the CA that signed the server's certificate
	mu     sync.Mutex
	log    []string
}

// The one package each registry holds: Python `sgdemo` 1.0.0 (VALUE = 42), npm `sg-demo` 1.0.0 (value: 7), R
// `sgdemo` 1.0.0 (sgvalue() is 42L, pure R source, so it installs without a compiler).
const (
	RegistryPyPackage   = "sgdemo"
	RegistryNodePackage = "sg-demo"
	RegistryRPackage    = "sgdemo"
)

// CRANURL is the R repository's URL (install.packages' repos, a profile's cran_mirror).
func (r *Registries) CRANURL() string { return r.URL + "/cran" }

// Requests lists the requests served so far (method and path).
func (r *Registries) Requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string{}, r.log...)
}

// BridgeGateway is the host's address on Docker's default bridge, which containers on it reach.
func BridgeGateway(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("docker", "network", "inspect", "bridge", "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}").Output()
	if gw := strings.TrimSpace(string(out)); err == nil && gw != "" {
		return gw
	}
	// The engine does not always report it; the docker0 interface has it.
	ifc, err := net.InterfaceByName("docker0")
	if err != nil {
		t.Fatalf("no bridge gateway: %v", err)
	}
	addrs, _ := ifc.Addrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	t.Fatal("docker0 has no IPv4 address")
	return ""
}

// StartRegistries serves both registries on the bridge gateway address until the test ends. Point a sandbox's
// pypi_index_url at URL+"/simple/" and npm_registry at URL+"/".
func StartRegistries(t testing.TB) *Registries {
	t.Helper()
	return startRegistries(t, false)
}

// StartRegistriesTLS serves the same registries over HTTPS, with a certificate for the gateway address from a CA
// of the test's own (CAFile): a stand-in for a TLS-intercepting proxy whose CA only the host trusts.
func StartRegistriesTLS(t testing.TB) *Registries {
	t.Helper()
	return startRegistries(t, true)
}

func startRegistries(t testing.TB, withTLS bool) *Registries {
	t.Helper()
	gw := BridgeGateway(t)
	ln, err := net.Listen("tcp", gw+":0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Registries{URL: "http://" + ln.Addr().String()}
	if withTLS {
		cfg, caPEM := testServerTLS(t, gw)
		r.URL = "https://" + ln.Addr().String()
		r.CAFile = filepath.Join(t.TempDir(), "registry-ca.pem")
		if err := os.WriteFile(r.CAFile, caPEM, 0o644); err != nil {
			t.Fatal(err)
		}
		ln = tls.NewListener(ln, cfg)
	}
	wheelName := RegistryPyPackage + "-1.0.0-py3-none-any.whl"
	wheel := buildWheel(t)
	wheelSum := sha256.Sum256(wheel)
	tgz := buildNpmTarball(t)
	sha1Sum := sha1.Sum(tgz)
	sha512Sum := sha512.Sum512(tgz)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /simple/{project}/", func(w http.ResponseWriter, req *http.Request) {
		if req.PathValue("project") != RegistryPyPackage {
			http.NotFound(w, req)
			return
		}
		fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"/files/%s#sha256=%s\">%s</a></body></html>\n", wheelName, hex.EncodeToString(wheelSum[:]), wheelName)
	})
	mux.HandleFunc("GET /files/"+wheelName, func(w http.ResponseWriter, _ *http.Request) { w.Write(wheel) })
	mux.HandleFunc("GET /"+RegistryNodePackage, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"name": RegistryNodePackage, "dist-tags": map[string]string{"latest": "1.0.0"},
			"versions": map[string]any{"1.0.0": map[string]any{
				"name": RegistryNodePackage, "version": "1.0.0", "main": "index.js",
				"dist": map[string]string{
					"tarball":   r.URL + "/" + RegistryNodePackage + "/-/" + RegistryNodePackage + "-1.0.0.tgz",
					"shasum":    hex.EncodeToString(sha1Sum[:]),
					"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sha512Sum[:]),
				},
			}},
		})
	})
	mux.HandleFunc("GET /"+RegistryNodePackage+"/-/"+RegistryNodePackage+"-1.0.0.tgz", func(w http.ResponseWriter, _ *http.Request) { w.Write(tgz) })
	// A CRAN-like repository: src/contrib/PACKAGES (and .gz; R asks for PACKAGES.rds first, which is absent) and
	// the source tarball.
	rIndex := "Package: " + RegistryRPackage + "\nVersion: 1.0.0\nLicense: MIT + file LICENSE\nNeedsCompilation: no\n\n"
	var rIndexGz bytes.Buffer
	gzw := gzip.NewWriter(&rIndexGz)
	gzw.Write([]byte(rIndex))
	gzw.Close()
	rTarball := buildRSourcePackage(t)
	mux.HandleFunc("GET /cran/src/contrib/PACKAGES", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(rIndex)) })
	mux.HandleFunc("GET /cran/src/contrib/PACKAGES.gz", func(w http.ResponseWriter, _ *http.Request) { w.Write(rIndexGz.Bytes()) })
	mux.HandleFunc("GET /cran/src/contrib/"+RegistryRPackage+"_1.0.0.tar.gz", func(w http.ResponseWriter, _ *http.Request) { w.Write(rTarball) })
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.log = append(r.log, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		mux.ServeHTTP(w, req)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return r
}

func buildWheel(t testing.TB) []byte {
	t.Helper()
	files := []struct{ name, body string }{
		{RegistryPyPackage + "/__init__.py", "VALUE = 42\n"},
		{RegistryPyPackage + "-1.0.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: " + RegistryPyPackage + "\nVersion: 1.0.0\n"},
		{RegistryPyPackage + "-1.0.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: sandgate-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f.body))
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	recordName := RegistryPyPackage + "-1.0.0.dist-info/RECORD"
	record.WriteString(recordName + ",,\n")
	w, _ := zw.Create(recordName)
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func buildNpmTarball(t testing.TB) []byte {
	t.Helper()
	return tarGz(t, []struct{ name, body string }{
		{"package/package.json", `{"name":"` + RegistryNodePackage + `","version":"1.0.0","main":"index.js"}`},
		{"package/index.js", "module.exports = { value: 7 };\n"},
	})
}

// buildRSourcePackage is an R source package as R CMD build lays it out (pure R: no compiler needed).
func buildRSourcePackage(t testing.TB) []byte {
	t.Helper()
	p := RegistryRPackage + "/"
	return tarGz(t, []struct{ name, body string }{
		{p + "DESCRIPTION", "Package: " + RegistryRPackage + "\nVersion: 1.0.0\nTitle: Sandgate Test Package\n" +
			"Description: A package served by sandgate's tests.\nAuthor: sandgate\nMaintainer: sandgate <test@sandgate.invalid>\n" +
			"License: MIT + file LICENSE\nNeedsCompilation: no\n"},
		{p + "LICENSE", "YEAR: 2026\nCOPYRIGHT HOLDER: sandgate\n"},
		{p + "NAMESPACE", "export(sgvalue)\n"},
		{p + "R/sgvalue.R", "sgvalue <- function() 42L\n"},
	})
}

func tarGz(t testing.TB, files []struct{ name, body string }) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(f.body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}
