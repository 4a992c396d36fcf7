package leases

import (
	"testing"

	"github.com/stretchr/testify/assert"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func lease(name, kind string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{KindLabel: kind}}}
}

func TestNames(t *testing.T) {
	assert.Equal(t, "dwd-member-dwd-0", MemberLeaseName("dwd", "dwd-0"))
	assert.Equal(t, "dwd-partition-17", PartitionLeaseName("dwd", 17))

	member, ok := MemberOf("dwd", lease("dwd-member-dwd-0", KindMember))
	assert.True(t, ok)
	assert.Equal(t, "dwd-0", member)
	for _, l := range []*coordinationv1.Lease{
		lease("dwd-member-", KindMember), lease("other-member-a", KindMember), lease("dwd-member-a", KindPartition),
	} {
		_, ok := MemberOf("dwd", l)
		assert.False(t, ok, l.Name)
	}

	p, ok := PartitionOf("dwd", 100, lease("dwd-partition-17", KindPartition))
	assert.True(t, ok)
	assert.Equal(t, 17, p)
	for _, name := range []string{"dwd-partition-100", "dwd-partition--1", "dwd-partition-017", "dwd-partition-x", "dwd-partition-", "x-partition-1"} {
		_, ok := PartitionOf("dwd", 100, lease(name, KindPartition))
		assert.False(t, ok, name)
	}
	_, ok = PartitionOf("dwd", 100, lease("dwd-partition-1", KindMember))
	assert.False(t, ok, "the kind label decides")

	assert.Equal(t, "", Holder(nil))
	assert.Equal(t, "", Holder(&coordinationv1.Lease{}))
	assert.Equal(t, "a", Holder(&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a")}}))
}
