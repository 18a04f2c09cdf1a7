package portproxy

import "context"

func contextWith(ctx context.Context, t target) context.Context {
	return context.WithValue(ctx, ctxKey{}, t)
}

func targetFrom(ctx context.Context) target {
	t, _ := ctx.Value(ctxKey{}).(target)
	return t
}
