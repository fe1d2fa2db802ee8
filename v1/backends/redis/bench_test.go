package redisbackend_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// BenchmarkChordMemberCompletion is what a chord member costs the backend
// when it succeeds: its SUCCESS state recorded in the group, which reports
// whether the group is complete (CompleteGroupMember, one round trip). The
// cost per member must not grow with the group, so it runs for groups of
// 100 and 10,000.
func BenchmarkChordMemberCompletion(b *testing.B) {
	for _, size := range []int{100, 10000} {
		b.Run(fmt.Sprintf("group=%d", size), func(b *testing.B) {
			srv := redistest.Start(b)
			be := newBackend(srv.Client(b), &config.Config{}, false)
			b.Cleanup(func() { be.Close() })
			ctx := context.Background()
			results := []*tasks.TaskResult{{Type: "int64", Value: int64(1)}}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				group := fmt.Sprintf("group_%d", i/size)
				sig := &tasks.Signature{UUID: fmt.Sprintf("task_%d", i), Name: "add", GroupUUID: group, GroupTaskCount: size}
				if _, err := be.CompleteGroupMember(ctx, sig, tasks.NewSuccessTaskState(sig, results)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
