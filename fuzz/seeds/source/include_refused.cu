#include "/etc/passwd"
#if __has_include("x")
#endif
