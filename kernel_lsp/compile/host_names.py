"""The names at global scope that nvcc's device pass declares and NVRTC does not: nvcc
preprocesses with the host compiler and includes cuda_runtime.h first, which brings in the C
library's headers (stdio.h, stdlib.h, string.h, strings.h, time.h, math.h, ctype.h, limits.h).
A file that declares one of them at global scope (`__device__ int index;`, a kernel named
`select`) compiles under NVRTC and may not under nvcc (`index` is strings.h's function), so
nvcc decides it.

`HOST_NAMES` was read from glibc 2.36 and GCC 12 on x86-64: the identifiers declared at global
scope in the C headers of `g++ -E -x c++ -include cuda_runtime.h -D__CUDA_ARCH__=900` (the
command nvcc's device pass runs, from `nvcc -cubin --dryrun`), plus C++'s classification
functions (`isnan`, `signbit`) that libstdc++'s math.h brings to global scope. Another C library
declares a few names more or fewer; a name it lacks only sends a file to nvcc.
"""

from __future__ import annotations

import re

from ..lexer import blank_comments

_NAMES = """
FILE _Exit _IO_FILE _IO_codecvt _IO_lock_t _IO_marker _IO_wide_data _T1 _tolower _toupper a64l
abort abs acos acosf acosf32 acosf32x acosf64 acosf64x acosh acoshf acoshf32 acoshf32x acoshf64
acoshf64x acoshl acosl aligned_alloc alloca arc4random arc4random_buf arc4random_uniform asctime
asctime_r asin asinf asinf32 asinf32x asinf64 asinf64x asinh asinhf asinhf32 asinhf32x asinhf64
asinhf64x asinhl asinl asprintf at_quick_exit atan atan2 atan2f atan2f32 atan2f32x atan2f64
atan2f64x atan2l atanf atanf32 atanf32x atanf64 atanf64x atanh atanhf atanhf32 atanhf32x
atanhf64 atanhf64x atanhl atanl atexit atof atoi atol atoll basename bcmp bcopy blkcnt64_t
blkcnt_t blksize_t bsearch bzero caddr_t calloc canonicalize canonicalize_file_name
canonicalizef canonicalizef32 canonicalizef32x canonicalizef64 canonicalizef64x canonicalizel
cbrt cbrtf cbrtf32 cbrtf32x cbrtf64 cbrtf64x cbrtl ceil ceilf ceilf32 ceilf32x ceilf64 ceilf64x
ceill clearenv clearerr clearerr_unlocked clock clock_adjtime clock_getcpuclockid clock_getres
clock_gettime clock_nanosleep clock_settime clock_t clockid_t comparison_fn_t
cookie_close_function_t cookie_io_functions_t cookie_read_function_t cookie_seek_function_t
cookie_write_function_t copysign copysignf copysignf32 copysignf32x copysignf64 copysignf64x
copysignl cos cosf cosf32 cosf32x cosf64 cosf64x cosh coshf coshf32 coshf32x coshf64 coshf64x
coshl cosl ctermid ctime ctime_r cuserid daddl daddr_t daylight ddivl dev_t dfmal difftime div
div_t dmull double_t dprintf drand48 drand48_r drem dremf dreml dsqrtl dsubl dysize ecvt ecvt_r
erand48 erand48_r erf erfc erfcf erfcf32 erfcf32x erfcf64 erfcf64x erfcl erff erff32 erff32x
erff64 erff64x erfl exit exp exp10 exp10f exp10f32 exp10f32x exp10f64 exp10f64x exp10l exp2
exp2f exp2f32 exp2f32x exp2f64 exp2f64x exp2l expf expf32 expf32x expf64 expf64x expl
explicit_bzero expm1 expm1f expm1f32 expm1f32x expm1f64 expm1f64x expm1l f32addf32x f32addf64
f32addf64x f32divf32x f32divf64 f32divf64x f32fmaf32x f32fmaf64 f32fmaf64x f32mulf32x f32mulf64
f32mulf64x f32sqrtf32x f32sqrtf64 f32sqrtf64x f32subf32x f32subf64 f32subf64x f32xaddf64
f32xaddf64x f32xdivf64 f32xdivf64x f32xfmaf64 f32xfmaf64x f32xmulf64 f32xmulf64x f32xsqrtf64
f32xsqrtf64x f32xsubf64 f32xsubf64x f64addf64x f64divf64x f64fmaf64x f64mulf64x f64sqrtf64x
f64subf64x fabs fabsf fabsf32 fabsf32x fabsf64 fabsf64x fabsl fadd faddl fclose fcloseall fcvt
fcvt_r fd_mask fd_set fdim fdimf fdimf32 fdimf32x fdimf64 fdimf64x fdiml fdiv fdivl fdopen feof
feof_unlocked ferror ferror_unlocked fflush fflush_unlocked ffma ffmal ffs ffsl ffsll fgetc
fgetc_unlocked fgetpos fgetpos64 fgets fgets_unlocked fileno fileno_unlocked finite finitef
finitel float_t flockfile floor floorf floorf32 floorf32x floorf64 floorf64x floorl fma fmaf
fmaf32 fmaf32x fmaf64 fmaf64x fmal fmax fmaxf fmaxf32 fmaxf32x fmaxf64 fmaxf64x fmaximum
fmaximum_mag fmaximum_mag_num fmaximum_mag_numf fmaximum_mag_numf32 fmaximum_mag_numf32x
fmaximum_mag_numf64 fmaximum_mag_numf64x fmaximum_mag_numl fmaximum_magf fmaximum_magf32
fmaximum_magf32x fmaximum_magf64 fmaximum_magf64x fmaximum_magl fmaximum_num fmaximum_numf
fmaximum_numf32 fmaximum_numf32x fmaximum_numf64 fmaximum_numf64x fmaximum_numl fmaximumf
fmaximumf32 fmaximumf32x fmaximumf64 fmaximumf64x fmaximuml fmaxl fmaxmag fmaxmagf fmaxmagf32
fmaxmagf32x fmaxmagf64 fmaxmagf64x fmaxmagl fmemopen fmin fminf fminf32 fminf32x fminf64
fminf64x fminimum fminimum_mag fminimum_mag_num fminimum_mag_numf fminimum_mag_numf32
fminimum_mag_numf32x fminimum_mag_numf64 fminimum_mag_numf64x fminimum_mag_numl fminimum_magf
fminimum_magf32 fminimum_magf32x fminimum_magf64 fminimum_magf64x fminimum_magl fminimum_num
fminimum_numf fminimum_numf32 fminimum_numf32x fminimum_numf64 fminimum_numf64x fminimum_numl
fminimumf fminimumf32 fminimumf32x fminimumf64 fminimumf64x fminimuml fminl fminmag fminmagf
fminmagf32 fminmagf32x fminmagf64 fminmagf64x fminmagl fmod fmodf fmodf32 fmodf32x fmodf64
fmodf64x fmodl fmul fmull fopen fopen64 fopencookie fpclassify fpos64_t fpos_t fprintf fputc
fputc_unlocked fputs fputs_unlocked fread fread_unlocked free freopen freopen64 frexp frexpf
frexpf32 frexpf32x frexpf64 frexpf64x frexpl fromfp fromfpf fromfpf32 fromfpf32x fromfpf64
fromfpf64x fromfpl fromfpx fromfpxf fromfpxf32 fromfpxf32x fromfpxf64 fromfpxf64x fromfpxl
fsblkcnt64_t fsblkcnt_t fscanf fseek fseeko fseeko64 fsetpos fsetpos64 fsfilcnt64_t fsfilcnt_t
fsid_t fsqrt fsqrtl fsub fsubl ftell ftello ftello64 ftrylockfile funlockfile fwrite
fwrite_unlocked gamma gammaf gammal gcvt getc getc_unlocked getchar getchar_unlocked getdate
getdate_err getdate_r getdelim getenv getline getloadavg getpayload getpayloadf getpayloadf32
getpayloadf32x getpayloadf64 getpayloadf64x getpayloadl getpt getsubopt getw gid_t gmtime
gmtime_r grantpt hypot hypotf hypotf32 hypotf32x hypotf64 hypotf64x hypotl id_t ilogb ilogbf
ilogbf32 ilogbf32x ilogbf64 ilogbf64x ilogbl index initstate initstate_r ino64_t ino_t int16_t
int32_t int64_t int8_t isalnum isalnum_l isalpha isalpha_l isascii isblank isblank_l iscanonical
iscntrl iscntrl_l isctype isdigit isdigit_l iseqsig isfinite isgraph isgraph_l isgreater
isgreaterequal isinf isinff isinfl isless islessequal islessgreater islower islower_l isnan
isnanf isnanl isnormal isprint isprint_l ispunct ispunct_l issignaling isspace isspace_l
isunordered isupper isupper_l isxdigit isxdigit_l iszero j0 j0f j0f32 j0f32x j0f64 j0f64x j0l j1
j1f j1f32 j1f32x j1f64 j1f64x j1l jn jnf jnf32 jnf32x jnf64 jnf64x jnl jrand48 jrand48_r key_t
l64a labs lcong48 lcong48_r ldexp ldexpf ldexpf32 ldexpf32x ldexpf64 ldexpf64x ldexpl ldiv
ldiv_t lgamma lgamma_r lgammaf lgammaf32 lgammaf32_r lgammaf32x lgammaf32x_r lgammaf64
lgammaf64_r lgammaf64x lgammaf64x_r lgammaf_r lgammal lgammal_r llabs lldiv lldiv_t llogb llogbf
llogbf32 llogbf32x llogbf64 llogbf64x llogbl llrint llrintf llrintf32 llrintf32x llrintf64
llrintf64x llrintl llround llroundf llroundf32 llroundf32x llroundf64 llroundf64x llroundl
locale_t localtime localtime_r loff_t log log10 log10f log10f32 log10f32x log10f64 log10f64x
log10l log1p log1pf log1pf32 log1pf32x log1pf64 log1pf64x log1pl log2 log2f log2f32 log2f32x
log2f64 log2f64x log2l logb logbf logbf32 logbf32x logbf64 logbf64x logbl logf logf32 logf32x
logf64 logf64x logl lrand48 lrand48_r lrint lrintf lrintf32 lrintf32x lrintf64 lrintf64x lrintl
lround lroundf lroundf32 lroundf32x lroundf64 lroundf64x lroundl malloc mblen mbstowcs mbtowc
memccpy memchr memcmp memcpy memfrob memmem memmove mempcpy memrchr memset mkdtemp mkostemp
mkostemp64 mkostemps mkostemps64 mkstemp mkstemp64 mkstemps mkstemps64 mktemp mktime mode_t modf
modff modff32 modff32x modff64 modff64x modfl mrand48 mrand48_r nan nanf nanf32 nanf32x nanf64
nanf64x nanl nanosleep nearbyint nearbyintf nearbyintf32 nearbyintf32x nearbyintf64
nearbyintf64x nearbyintl nextafter nextafterf nextafterf32 nextafterf32x nextafterf64
nextafterf64x nextafterl nextdown nextdownf nextdownf32 nextdownf32x nextdownf64 nextdownf64x
nextdownl nexttoward nexttowardf nexttowardl nextup nextupf nextupf32 nextupf32x nextupf64
nextupf64x nextupl nlink_t nrand48 nrand48_r obstack obstack_printf obstack_vprintf off64_t
off_t on_exit open_memstream pclose perror pid_t popen posix_memalign posix_openpt pow powf
powf32 powf32x powf64 powf64x powl printf pselect pthread_attr_t pthread_barrier_t
pthread_barrierattr_t pthread_cond_t pthread_condattr_t pthread_key_t pthread_mutex_t
pthread_mutexattr_t pthread_once_t pthread_rwlock_t pthread_rwlockattr_t pthread_spinlock_t
pthread_t ptsname ptsname_r putc putc_unlocked putchar putchar_unlocked putenv puts putw qecvt
qecvt_r qfcvt qfcvt_r qgcvt qsort qsort_r quad_t quick_exit rand rand_r random random_r
rawmemchr realloc reallocarray realpath remainder remainderf remainderf32 remainderf32x
remainderf64 remainderf64x remainderl remove remquo remquof remquof32 remquof32x remquof64
remquof64x remquol rename renameat renameat2 rewind rindex rint rintf rintf32 rintf32x rintf64
rintf64x rintl round roundeven roundevenf roundevenf32 roundevenf32x roundevenf64 roundevenf64x
roundevenl roundf roundf32 roundf32x roundf64 roundf64x roundl rpmatch scalb scalbf scalbl
scalbln scalblnf scalblnf32 scalblnf32x scalblnf64 scalblnf64x scalblnl scalbn scalbnf scalbnf32
scalbnf32x scalbnf64 scalbnf64x scalbnl scanf secure_getenv seed48 seed48_r select setbuf
setbuffer setenv setlinebuf setpayload setpayloadf setpayloadf32 setpayloadf32x setpayloadf64
setpayloadf64x setpayloadl setpayloadsig setpayloadsigf setpayloadsigf32 setpayloadsigf32x
setpayloadsigf64 setpayloadsigf64x setpayloadsigl setstate setstate_r setvbuf sigabbrev_np
sigdescr_np sigevent signbit signgam significand significandf significandl sigset_t sin sincos
sincosf sincosf32 sincosf32x sincosf64 sincosf64x sincosl sinf sinf32 sinf32x sinf64 sinf64x
sinh sinhf sinhf32 sinhf32x sinhf64 sinhf64x sinhl sinl snprintf sprintf sqrt sqrtf sqrtf32
sqrtf32x sqrtf64 sqrtf64x sqrtl srand srand48 srand48_r srandom srandom_r sscanf ssize_t stderr
stdin stdout stpcpy stpncpy strcasecmp strcasecmp_l strcasestr strcat strchr strchrnul strcmp
strcoll strcoll_l strcpy strcspn strdup strerror strerror_l strerror_r strerrordesc_np
strerrorname_np strfromd strfromf strfromf32 strfromf32x strfromf64 strfromf64x strfroml strfry
strftime strftime_l strlen strncasecmp strncasecmp_l strncat strncmp strncpy strndup strnlen
strpbrk strptime strptime_l strrchr strsep strsignal strspn strstr strtod strtod_l strtof
strtof32 strtof32_l strtof32x strtof32x_l strtof64 strtof64_l strtof64x strtof64x_l strtof_l
strtok strtok_r strtol strtol_l strtold strtold_l strtoll strtoll_l strtoq strtoul strtoul_l
strtoull strtoull_l strtouq strverscmp strxfrm strxfrm_l suseconds_t system tan tanf tanf32
tanf32x tanf64 tanf64x tanh tanhf tanhf32 tanhf32x tanhf64 tanhf64x tanhl tanl tempnam tgamma
tgammaf tgammaf32 tgammaf32x tgammaf64 tgammaf64x tgammal time time_t timegm timelocal
timer_create timer_delete timer_getoverrun timer_gettime timer_settime timer_t timespec_get
timespec_getres timezone tmpfile tmpfile64 tmpnam tmpnam_r toascii tolower tolower_l totalorder
totalorderf totalorderf32 totalorderf32x totalorderf64 totalorderf64x totalorderl totalordermag
totalordermagf totalordermagf32 totalordermagf32x totalordermagf64 totalordermagf64x
totalordermagl toupper toupper_l trunc truncf truncf32 truncf32x truncf64 truncf64x truncl
tzname tzset u_char u_int u_int16_t u_int32_t u_int64_t u_int8_t u_long u_quad_t u_short ufromfp
ufromfpf ufromfpf32 ufromfpf32x ufromfpf64 ufromfpf64x ufromfpl ufromfpx ufromfpxf ufromfpxf32
ufromfpxf32x ufromfpxf64 ufromfpxf64x ufromfpxl uid_t uint ulong ungetc unlockpt unsetenv
useconds_t ushort va_list valloc vasprintf vdprintf vfprintf vfscanf vprintf vscanf vsnprintf
vsprintf vsscanf wcstombs wctomb y0 y0f y0f32 y0f32x y0f64 y0f64x y0l y1 y1f y1f32 y1f32x y1f64
y1f64x y1l yn ynf ynf32 ynf32x ynf64 ynf64x ynl
"""
HOST_NAMES = frozenset(_NAMES.split())

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_DIRECTIVE = re.compile(r"^[ \t]*#.*(?:\\\n.*)*$", re.M)
# Braces that open no scope of their own: `extern "C" {` (its string blanked) and an anonymous
# namespace, whose names global lookup finds too.
_TRANSPARENT = re.compile(r"\bextern\s*\{|\bnamespace\s*\{")
_DECLARES = re.compile(r"\s*[(\[;=,{]")  # what follows a declared name


def global_names(text: str, among: frozenset[str] | None = None) -> set[str]:
    """The names a text declares at global scope (of `among`, when given): each identifier at
    brace and parenthesis depth 0 that a declaration's `(`, `;`, `=`, `[`, `{` or `,` follows
    (`index` in `__device__ int index;`, `k` in `__global__ void k(...)`). Parameters, bodies and
    named namespaces are not global scope; a keyword or type name among them is harmless (none is
    a host name). Only the braces, parentheses and the names asked about are visited: a check
    asks on every save."""
    code = _DIRECTIVE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), blank_comments(text))
    wanted = set(_IDENTIFIER.findall(code))
    if among is not None:
        wanted &= among
    if not wanted:
        return set()
    names = "|".join(sorted(wanted, key=len, reverse=True))
    tokens = re.compile(rf"[{{}}()]|\b(?:{names})\b")
    transparent = {m.end() - 1 for m in _TRANSPARENT.finditer(code)}
    found: set[str] = set()
    braces: list[bool] = []  # per open brace: does it open a scope?
    parens = 0
    for m in tokens.finditer(code):
        token = m.group(0)
        if token == "{":
            braces.append(m.start() not in transparent)
        elif token == "}":
            if braces:
                braces.pop()
        elif token == "(":
            parens += 1
        elif token == ")":
            parens = max(0, parens - 1)
        elif parens == 0 and not any(braces) and _DECLARES.match(code, m.end()):
            found.add(token)
    return found


def host_name_clashes(text: str) -> list[str]:
    """The global-scope names the text declares that nvcc's implicit host headers declare too."""
    return sorted(global_names(text, HOST_NAMES))
