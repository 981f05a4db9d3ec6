package workspacev1

// ImpersonateUserMetadata is the call metadata a caller names an end user with, to act for
// them (a portal serving many developers with one identity): the call is then that user's
// (their workspaces, their quotas). The API allows it only when the cluster lets the caller
// impersonate that user (a SubjectAccessReview, verb impersonate on users, as for kubectl
// --as), and only for callers the cluster identifies, never a token Secret's users.
const ImpersonateUserMetadata = "impersonate-user"
