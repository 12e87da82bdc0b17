/* c */ // x
#define A(x) x ## 1
R"(raw)" 'c' "s\""
