package browser

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The optional CDP filter (?filter=browser_close) keeps a client from ending the shared browser. It fails closed:
// a client->browser message it cannot read exactly as Chromium would is refused and the connection ends with 1008,
// because a message the filter misreads (a duplicate "method" key, where Chromium keeps the last and a lenient
// decoder the first; invalid UTF-8; "id":1.0; a numeric sessionId) is how a Browser.close gets past it.
//
// Methods that end the browser are answered by the filter with an empty result and never forwarded:
//   - Browser.close: quits Chromium;
//   - Browser.crash: crashes the browser process;
//   - Browser.crashGpuProcess: crashes the GPU process, which takes the browser down when the GPU is disabled.
//
// Target.closeTarget is forwarded: it closes one page, which is ordinary automation, and the browser target itself
// cannot be closed through it (Chromium answers an error). Page.crash crashes one renderer, not the browser.
var browserEnding = map[string]bool{"Browser.close": true, "Browser.crash": true, "Browser.crashGpuProcess": true}

// cdpMethod is the shape of a CDP method name: Domain.command.
var cdpMethod = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*\.[A-Za-z][A-Za-z0-9]*$`)

// integerLiteral is the only spelling of a command id the filter passes on.
var integerLiteral = regexp.MustCompile(`^-?(0|[1-9][0-9]{0,17})$`)

// filterError is a message the filter refused; it ends the relay with 1008.
type filterError struct{ reason string }

func (e *filterError) Error() string { return "CDP filter: " + e.reason }

// cdpCommand is a client->browser command, every member Chromium reads.
type cdpCommand struct {
	ID        jsontext.Value `json:"id"`
	Method    string         `json:"method"`
	Params    jsontext.Value `json:"params,omitzero"`
	SessionID *string        `json:"sessionId,omitzero"`
}

// parseCommand reads msg strictly: valid UTF-8, one JSON object, no duplicate or unknown members, an integer id, a
// method of CDP's shape, params an object, sessionId a string.
func parseCommand(msg []byte) (cdpCommand, int64, error) {
	var c cdpCommand
	if !utf8.Valid(msg) {
		return c, 0, &filterError{"message is not valid UTF-8"}
	}
	if err := jsonv2.Unmarshal(msg, &c, jsonv2.RejectUnknownMembers(true)); err != nil {
		return c, 0, &filterError{fmt.Sprintf("unreadable command: %v", err)}
	}
	if !integerLiteral.Match(c.ID) {
		return c, 0, &filterError{fmt.Sprintf("command id %.20q is not an integer", c.ID)}
	}
	id, err := strconv.ParseInt(string(c.ID), 10, 64)
	if err != nil {
		return c, 0, &filterError{"command id out of range"}
	}
	if !cdpMethod.MatchString(c.Method) {
		return c, 0, &filterError{fmt.Sprintf("method %.60q is not a CDP method", c.Method)}
	}
	if len(c.Params) > 0 && c.Params.Kind() != '{' {
		return c, 0, &filterError{"params is not an object"}
	}
	return c, id, nil
}

// filterBrowserEnding inspects a client->browser message. A method that ends the browser is answered here (an empty
// result with the command's id and session) and not forwarded; anything unreadable is an error.
func filterBrowserEnding(msg []byte) ([]byte, error) {
	c, id, err := parseCommand(msg)
	if err != nil {
		return nil, err
	}
	if !browserEnding[c.Method] {
		return nil, nil
	}
	sid := ""
	if c.SessionID != nil {
		sid = *c.SessionID
	}
	// Built by hand: clients expect an empty result object.
	reply, err := json.Marshal(struct {
		ID        int64    `json:"id"`
		SessionID string   `json:"sessionId,omitempty"`
		Result    struct{} `json:"result"`
	}{ID: id, SessionID: sid})
	if err != nil {
		return nil, &filterError{"cannot build the reply"}
	}
	return reply, nil
}
