package caddymodule

import "github.com/caddyserver/caddy/v2"

// pool keeps one value per key across config reloads (a caddy.UsagePool of T): load takes a reference, making the
// value on first use; release drops one, and the last release closes the value if it has a Close() error.
type pool[T any] struct{ p *caddy.UsagePool }

func newPool[T any]() pool[T] { return pool[T]{caddy.NewUsagePool()} }

// pooled is the pool's caddy.Destructor around a value.
type pooled[T any] struct{ v T }

func (p pooled[T]) Destruct() error {
	if c, ok := any(p.v).(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// load takes a reference to key's value, made by create if the pool holds none.
func (p pool[T]) load(key string, create func() (T, error)) (T, error) {
	v, _, err := p.p.LoadOrNew(key, func() (caddy.Destructor, error) {
		v, err := create()
		if err != nil {
			return nil, err
		}
		return pooled[T]{v}, nil
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return v.(pooled[T]).v, nil
}

// release drops a reference taken by load; an empty key is a no-op.
func (p pool[T]) release(key string) error {
	if key == "" {
		return nil
	}
	_, err := p.p.Delete(key)
	return err
}

// each calls f on every pooled value until f returns false.
func (p pool[T]) each(f func(T) bool) {
	p.p.Range(func(_, v any) bool { return f(v.(pooled[T]).v) })
}
