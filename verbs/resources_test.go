package verbs_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/verbs"
)

// TestPostSendWithoutLink: a host that was never connected refuses a
// send with ENETDOWN, naming the host and what to do, and posts nothing;
// it used to panic in the fabric. Once connected, the same QP sends.
func TestPostSendWithoutLink(t *testing.T) {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	a, b := setup(ha, 1), setup(hb, 1)
	require.NoError(t, a.connect(b))
	require.NoError(t, b.connect(a))
	_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(100, b)})
	require.NoError(t, err)

	i, err := a.qp.PostSend([]verbs.SendWR{sendWR(1, a, 16)})
	require.Error(t, err)
	assert.True(t, errors.Is(err, syscall.ENETDOWN), "%v", err)
	assert.Contains(t, err.Error(), "post_send: host a has no link")
	assert.Equal(t, 0, i, "the first WR is the one refused")
	require.NoError(t, w.Run())
	assert.Empty(t, pollAll(a.cq), "nothing was posted")
	assert.Zero(t, ha.Unsent())

	require.NoError(t, w.Connect(ha, hb))
	_, err = a.qp.PostSend([]verbs.SendWR{sendWR(2, a, 16)})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, []string{"2:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)))
	assert.Equal(t, []string{"100:IBV_WC_SUCCESS"}, summary(pollAll(b.cq)))
}
