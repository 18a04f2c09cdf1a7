// Command wsecho is the WebSocket echo server the edge benchmarks run inside a sandbox: every message comes back
// unchanged, on any path. With -root it is also a small web app: requests that are not WebSocket upgrades are
// served from that directory (the integration tests' app pages).
package main

import (
	"context"
	"flag"
	"log"
	"net/http"
	"strings"

	"github.com/coder/websocket"
)

func main() {
	addr := flag.String("addr", ":9000", "listen address")
	root := flag.String("root", "", "serve files from this directory to requests that are not WebSocket upgrades")
	flag.Parse()
	var files http.Handler
	if *root != "" {
		files = http.FileServer(http.Dir(*root))
	}
	log.Fatal(http.ListenAndServe(*addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if files != nil && !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			files.ServeHTTP(w, r)
			return
		}
		echo(w, r)
	})))
}

func echo(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(16 << 20)
	ctx := context.Background()
	for {
		typ, p, err := c.Read(ctx)
		if err != nil {
			return
		}
		if err := c.Write(ctx, typ, p); err != nil {
			return
		}
	}
}
