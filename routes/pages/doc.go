// Package pages serves the pages a person opens in a browser: the web terminal (xterm.js) and the desktop (noVNC)
// of one sandbox, opened with a ticket, and the console, where an API key holder lists, creates, stops, extends,
// deletes and opens sandboxes. It is net/http only; caddymodule adapts it as the sandbox_pages handler.
//
// The pages carry no third-party code in the repository: scripts/assets.sh copies xterm.js and noVNC from
// node_modules into web/vendor (git-ignored), which is embedded when present. A binary built without it still
// runs and answers the pages with 503 "assets not built: run make assets".
package pages
