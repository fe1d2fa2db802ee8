package tasks

import "context"

type signatureCtxKey struct{}

// WithSignature returns a copy of ctx that carries sig, for
// SignatureFromContext. The worker calls it for every task it runs.
func WithSignature(ctx context.Context, sig *Signature) context.Context {
	return context.WithValue(ctx, signatureCtxKey{}, sig)
}

// SignatureFromContext returns the signature of the task whose context ctx
// is, or nil.
func SignatureFromContext(ctx context.Context) *Signature {
	sig, _ := ctx.Value(signatureCtxKey{}).(*Signature)
	return sig
}
