package browser

import (
	"context"
	"fmt"
	"sync"

	"github.com/chromedp/cdproto"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/coder/websocket"
)

// session is a CDP connection to one target, implementing cdproto's cdp.Session so the typed commands
// (page.Navigate, runtime.Evaluate...) run over it.
type session struct {
	conn *websocket.Conn
	done chan struct{}

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan *cdproto.Message
	subs    map[string]map[chan jsonv2.Value]struct{}
	err     error
}

func dialSession(ctx context.Context, wsURL string) (*session, error) {
	c, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", wsURL, err)
	}
	c.SetReadLimit(256 << 20) // full-page screenshots
	s := &session{conn: c, done: make(chan struct{}), pending: map[int64]chan *cdproto.Message{}, subs: map[string]map[chan jsonv2.Value]struct{}{}}
	go s.read()
	return s, nil
}

func (s *session) read() {
	var err error
	defer func() {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(s.done)
	}()
	for {
		var data []byte
		_, data, err = s.conn.Read(context.Background())
		if err != nil {
			return
		}
		var m cdproto.Message
		if jsonv2.Unmarshal(data, &m) != nil {
			continue
		}
		s.mu.Lock()
		if m.ID != 0 {
			if ch, ok := s.pending[m.ID]; ok {
				delete(s.pending, m.ID)
				ch <- &m
			}
		} else if m.Method != "" {
			for ch := range s.subs[string(m.Method)] {
				select {
				case ch <- m.Params:
				default: // a subscriber that stopped reading loses events rather than stalling the session
				}
			}
		}
		s.mu.Unlock()
	}
}

// alive reports whether the connection still stands.
func (s *session) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Call sends one command and waits for its result.
func (s *session) Call(ctx context.Context, method string, params, result any) error {
	raw, err := jsonv2.Marshal(params)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", method, err)
	}
	ch := make(chan *cdproto.Message, 1)
	s.mu.Lock()
	if !s.alive() {
		s.mu.Unlock()
		return fmt.Errorf("%s: connection to chromium closed: %w", method, s.err)
	}
	s.nextID++
	id := s.nextID
	s.pending[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
	}()
	msg, err := jsonv2.Marshal(cdproto.Message{ID: id, Method: cdproto.MethodType(method), Params: raw})
	if err != nil {
		return fmt.Errorf("encoding %s: %w", method, err)
	}
	if err := s.conn.Write(ctx, websocket.MessageText, msg); err != nil {
		return fmt.Errorf("sending %s: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Errorf("%s: %w", method, m.Error)
		}
		if result == nil || len(m.Result) == 0 {
			return nil
		}
		if err := jsonv2.Unmarshal(m.Result, result); err != nil {
			return fmt.Errorf("decoding %s result: %w", method, err)
		}
		return nil
	case <-s.done:
		return fmt.Errorf("%s: connection to chromium closed", method)
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// Subscribe buffers the events of method until cancel is called.
func (s *session) Subscribe(method string) (<-chan jsonv2.Value, func()) {
	ch := make(chan jsonv2.Value, 16)
	s.mu.Lock()
	if s.subs[method] == nil {
		s.subs[method] = map[chan jsonv2.Value]struct{}{}
	}
	s.subs[method][ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		delete(s.subs[method], ch)
		s.mu.Unlock()
	}
}

func (s *session) close() {
	_ = s.conn.Close(websocket.StatusNormalClosure, "")
	<-s.done
}
