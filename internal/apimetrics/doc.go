// Package apimetrics counts the requests of every API client of a dwd process, the seed's and the
// shoots': CountRequests wraps a client's transport so that each request lands in
// dwd_api_requests_total by API (seed or shoot), client and answer (the HTTP code, or "error"), and
// each 429 in dwd_api_throttled_requests_total. The metrics are registered in controller-runtime's
// registry when the first transport is wrapped.
package apimetrics
