package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/tickets"
)

const benchSecret = "edge-benchmark-secret-0123456789abcdef"

// edgeRig is a gateway serving one sandbox through sandbox_proxy, the same agent through a stock reverse_proxy
// site, and a WebSocket echo server running inside the sandbox on port 9000.
type edgeRig struct {
	gw      *testenv.Gateway
	gateway string // https://localhost:P, sandbox_ticket + sandbox_proxy
	stock   string // https://localhost:Q, rewrite + reverse_proxy to the agent
	// The same two sites over cleartext HTTP/1.1, so their cost can be told from TLS's (the agent baseline is
	// cleartext too).
	gatewayPlain, stockPlain string
	client                   *http.Client
	issuer                   *tickets.Issuer
	id                       string
	agentURL                 string // http://ip:7777
	echoURL                  string // ws://ip:9000
	token                    string
	container                string
}

func newEdgeRig(b *testing.B) *edgeRig {
	b.Helper()
	testenv.Integration(b)
	image := testenv.Image(b, "base")
	ns := testenv.Unique("sgbench")
	testenv.RemoveNamespace(b, ns)
	r := &edgeRig{}
	gwPort, stockPort, httpPort := testenv.FreePort(b), testenv.FreePort(b), testenv.FreePort(b)
	gwPlainPort, stockPlainPort := testenv.FreePort(b), testenv.FreePort(b)
	base := fmt.Sprintf(`{
	admin {$SANDGATE_ADMIN}
	http_port %d
	https_port %d
	skip_install_trust
	grace_period 2s
	sandboxes {
		namespace %s
		profile bench {
			image %s
			cpus 1
			memory 512m
			pids 256
			disk 64m
			capabilities shell
			app_port 9000
		}
	}
}

https://localhost:%d {
	tls internal
	sandbox_ticket /sandboxes/*
	sandbox_proxy /sandboxes/*
}

http://localhost:%d {
	sandbox_ticket /sandboxes/*
	sandbox_proxy /sandboxes/*
}
`, httpPort, gwPort, ns, image, gwPort, gwPlainPort)
	r.gw = testenv.StartGateway(b, base, testenv.GatewayOptions{Env: []string{tickets.EnvSecret + "=" + benchSecret}})
	r.gateway = fmt.Sprintf("https://localhost:%d", gwPort)
	r.stock = fmt.Sprintf("https://localhost:%d", stockPort)
	r.gatewayPlain = fmt.Sprintf("http://localhost:%d", gwPlainPort)
	r.stockPlain = fmt.Sprintf("http://localhost:%d", stockPlainPort)
	var err error
	if r.issuer, err = tickets.NewIssuer(tickets.IssuerConfig{Secret: []byte(benchSecret), MintPerMinute: -1}); err != nil {
		b.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: r.gw.RootCAs(b, ctx)}, MaxIdleConnsPerHost: 2048}}
	testenv.WaitHandshake(b, ctx, r.client, r.gateway+"/")
	// A sandbox, its address and agent token (from the container's environment), and the echo server inside it.
	r.id = r.gw.CreateSandbox(b, "bench", "")
	// A first request through the gateway starts the sandbox.
	tk, err := r.issuer.Issue(tickets.IssueRequest{SandboxID: r.id, Kind: tickets.KindApp})
	if err != nil {
		b.Fatal(err)
	}
	if resp, err := r.client.Get(r.gateway + "/sandboxes/" + r.id + "/app/9000/?ticket=" + tk.Token); err == nil {
		resp.Body.Close()
	} else {
		b.Fatal(err)
	}
	r.container = strings.TrimSpace(dockerOut(b, "ps", "-q", "--filter", "label="+ns+".id="+r.id))
	ip := strings.TrimSpace(dockerOut(b, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", r.container))
	_, r.token = r.gw.Agent(b, r.id)
	r.agentURL = fmt.Sprintf("http://%s:%d", ip, agentapi.DefaultPort)
	r.echoURL = fmt.Sprintf("ws://%s:9000/", ip)
	r.startEcho(b)

	// The stock Caddy site: the same binary's reverse_proxy to the same agent path, token injected.
	stockSite := fmt.Sprintf(`
https://localhost:%[1]d {
	tls internal
	rewrite * /proxy/9000{uri}
	reverse_proxy %[3]s:%[4]d {
		header_up X-Sandgate-Token %[5]s
		flush_interval -1
	}
}

http://localhost:%[2]d {
	rewrite * /proxy/9000{uri}
	reverse_proxy %[3]s:%[4]d {
		header_up X-Sandgate-Token %[5]s
		flush_interval -1
	}
}
`, stockPort, stockPlainPort, ip, agentapi.DefaultPort, r.token)
	if err := r.gw.Reload(base + stockSite); err != nil {
		b.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	testenv.WaitHandshake(b, ctx, r.client, r.stock+"/")
	return r
}

// startEcho runs wsecho in the sandbox on port 9000 and waits until it answers.
func (r *edgeRig) startEcho(b *testing.B) {
	b.Helper()
	testenv.StartWSEcho(b, r.container, "9000")
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, _, err := websocket.Dial(context.Background(), r.echoURL, nil)
		if err == nil {
			c.CloseNow()
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("echo server in the sandbox did not answer: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func dockerOut(b *testing.B, args ...string) string {
	b.Helper()
	out, err := exec.Command("docker", args...).Output()
	if err != nil {
		b.Fatalf("docker %v: %v", args, err)
	}
	return string(out)
}

// path is one way of reaching the echo server.
type path struct {
	name string
	dial func(ctx context.Context) (*websocket.Conn, error)
}

func (r *edgeRig) paths(b *testing.B) []path {
	ps := []path{{"direct-echo", func(ctx context.Context) (*websocket.Conn, error) {
		c, _, err := websocket.Dial(ctx, r.echoURL, nil)
		return c, err
	}}}
	return append(ps,
		path{"direct-agent", func(ctx context.Context) (*websocket.Conn, error) {
			c, _, err := websocket.Dial(ctx, strings.Replace(r.agentURL, "http", "ws", 1)+"/proxy/9000/",
				&websocket.DialOptions{HTTPHeader: http.Header{agentapi.TokenHeader: {r.token}}})
			return c, err
		}},
		path{"stock-caddy", func(ctx context.Context) (*websocket.Conn, error) {
			c, _, err := websocket.Dial(ctx, strings.Replace(r.stock, "https", "wss", 1)+"/", &websocket.DialOptions{HTTPClient: r.client})
			return c, err
		}},
		path{"gateway", func(ctx context.Context) (*websocket.Conn, error) {
			return r.dialGateway(ctx, strings.Replace(r.gateway, "https", "wss", 1))
		}},
		path{"stock-h1", func(ctx context.Context) (*websocket.Conn, error) {
			c, _, err := websocket.Dial(ctx, strings.Replace(r.stockPlain, "http", "ws", 1)+"/", nil)
			return c, err
		}},
		path{"gateway-h1", func(ctx context.Context) (*websocket.Conn, error) {
			return r.dialGateway(ctx, strings.Replace(r.gatewayPlain, "http", "ws", 1))
		}},
	)
}

// dialGateway opens the app route of the rig's sandbox on a gateway site with a fresh ticket.
func (r *edgeRig) dialGateway(ctx context.Context, site string) (*websocket.Conn, error) {
	tk, err := r.issuer.Issue(tickets.IssueRequest{SandboxID: r.id, Kind: tickets.KindApp})
	if err != nil {
		return nil, err
	}
	c, _, err := websocket.Dial(ctx, site+"/sandboxes/"+r.id+"/app/9000/?ticket="+tk.Token, &websocket.DialOptions{HTTPClient: r.client})
	return c, err
}

type echoResult struct {
	p50, p99 time.Duration
	mbps     float64
}

// BenchmarkEdgeWebSocketEcho measures a WebSocket echo's round-trip latency (64 B messages) and throughput (64 KiB
// messages) through the gateway (ticket, lease, dynamic upstream, agent /proxy), a stock reverse_proxy site to the
// same agent path, the agent directly, and the echo server directly, and prints ratios.
func BenchmarkEdgeWebSocketEcho(b *testing.B) {
	r := newEdgeRig(b)
	results := map[string]*echoResult{}
	ps := r.paths(b)
	for _, p := range ps {
		res := &echoResult{}
		results[p.name] = res
		b.Run(p.name+"/latency-64B", func(b *testing.B) {
			c := mustDial(b, p)
			defer c.CloseNow()
			msg := make([]byte, 64)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				roundTrip(b, c, msg)
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			res.p50, res.p99 = testenv.Percentile(lat, .5), testenv.Percentile(lat, .99)
			b.ReportMetric(float64(res.p50.Microseconds()), "p50-µs")
			b.ReportMetric(float64(res.p99.Microseconds()), "p99-µs")
		})
		b.Run(p.name+"/throughput-64KiB", func(b *testing.B) {
			c := mustDial(b, p)
			defer c.CloseNow()
			msg := make([]byte, 64<<10)
			b.SetBytes(int64(2 * len(msg)))
			b.ResetTimer()
			t0 := time.Now()
			for range b.N {
				roundTrip(b, c, msg)
			}
			res.mbps = float64(2*len(msg)*b.N) / time.Since(t0).Seconds() / 1e6
		})
	}
	base := results["direct-agent"]
	if base == nil {
		base = results["direct-echo"]
	}
	for _, p := range ps {
		res := results[p.name]
		fmt.Printf("edge ws echo %-12s p50 %7s (x%.2f)  p99 %7s (x%.2f)  %8.1f MB/s (x%.2f)\n", p.name,
			res.p50, ratio(res.p50, base.p50), res.p99, ratio(res.p99, base.p99), res.mbps, res.mbps/base.mbps)
	}
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func mustDial(b *testing.B, p path) *websocket.Conn {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := p.dial(ctx)
	if err != nil {
		b.Fatalf("dialing %s: %v", p.name, err)
	}
	c.SetReadLimit(16 << 20)
	return c
}

func roundTrip(b *testing.B, c *websocket.Conn, msg []byte) {
	ctx := context.Background()
	if err := c.Write(ctx, websocket.MessageBinary, msg); err != nil {
		b.Fatal(err)
	}
	if _, got, err := c.Read(ctx); err != nil || len(got) != len(msg) {
		b.Fatalf("echo: %d bytes, %v", len(got), err)
	}
}

// BenchmarkEdgeIdleWebSocketMemory opens 1,000 idle WebSockets through the gateway and through the stock
// reverse_proxy site and reports the gateway process's heap and RSS growth per connection.
func BenchmarkEdgeIdleWebSocketMemory(b *testing.B) {
	r := newEdgeRig(b)
	const conns = 1000
	var perConn = map[string][2]float64{}
	for _, p := range r.paths(b) {
		if p.name == "direct-echo" || p.name == "direct-agent" {
			continue
		}
		b.Run(p.name, func(b *testing.B) {
			for range b.N {
				heap0, rss0 := r.memory(b)
				open := make([]*websocket.Conn, 0, conns)
				var mu sync.Mutex
				var wg sync.WaitGroup
				sem := make(chan struct{}, 32)
				for range conns {
					wg.Add(1)
					sem <- struct{}{}
					go func() {
						defer wg.Done()
						defer func() { <-sem }()
						c := mustDial(b, p)
						roundTrip(b, c, []byte("hi"))
						mu.Lock()
						open = append(open, c)
						mu.Unlock()
					}()
				}
				wg.Wait()
				heap1, rss1 := r.memory(b)
				h, s := (heap1-heap0)/conns, (rss1-rss0)/conns
				perConn[p.name] = [2]float64{h, s}
				b.ReportMetric(h, "heap-B/conn")
				b.ReportMetric(s, "rss-B/conn")
				for _, c := range open {
					c.Close(websocket.StatusNormalClosure, "")
				}
			}
		})
	}
	if g, s := perConn["gateway"], perConn["stock-caddy"]; s[0] > 0 {
		fmt.Printf("edge idle ws memory per conn: gateway heap %.0f B rss %.0f B; stock heap %.0f B rss %.0f B (x%.2f heap)\n",
			g[0], g[1], s[0], s[1], g[0]/s[0])
	}
}

var metricLine = regexp.MustCompile(`(?m)^(go_memstats_heap_inuse_bytes|process_resident_memory_bytes) ([0-9.e+]+)$`)

// memory forces a GC in the gateway (pprof heap?gc=1) and reads its heap in use and RSS from the admin metrics.
func (r *edgeRig) memory(b *testing.B) (heap, rss float64) {
	b.Helper()
	if resp, err := http.Get("http://" + r.gw.AdminAddr + "/debug/pprof/heap?gc=1"); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	resp, err := http.Get("http://" + r.gw.AdminAddr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range metricLine.FindAllStringSubmatch(string(body), -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		if m[1] == "go_memstats_heap_inuse_bytes" {
			heap = v
		} else {
			rss = v
		}
	}
	if heap == 0 || rss == 0 {
		b.Fatalf("gateway metrics lack heap or RSS:\n%.500s", body)
	}
	return heap, rss
}
