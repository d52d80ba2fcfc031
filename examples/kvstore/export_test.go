package kvstore

// BreakRepost plants a bug in c: it never re-posts a receive after a
// response has used it. The tests use it (with -kvstore.break=repost) to
// show how a broken client fails under verbstest.
func BreakRepost(c *Client) { c.skipRepost = true }
