// Command wsecho is the WebSocket echo server the edge benchmarks run inside a sandbox: every message comes back
// unchanged, on any path.
package main

import (
	"context"
	"flag"
	"log"
	"net/http"

	"github.com/coder/websocket"
)

func main() {
	addr := flag.String("addr", ":9000", "listen address")
	flag.Parse()
	log.Fatal(http.ListenAndServe(*addr, http.HandlerFunc(echo)))
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
