"""``fp8ref bringup``: fingerprint a stack, check its fp8 casts and kernels against fp8ref, write a certificate."""
