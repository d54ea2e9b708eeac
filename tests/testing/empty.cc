// Keeps pdist_testing non-empty.
