#ifndef UTILITY_H
#define UTILITY_H

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>

#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

#define STRINGIFY(x) #x

// convert symbol name to function pointer name
#define FUNC_PTR(_symbol) __wrapper_##_symbol

// common macro to define wrapper function
#define DEFINE_WRAPPER_FUNC_COMMON(_prefix, _symbol, _ret, ...)                \
	static _ret (*FUNC_PTR(_symbol))(__VA_ARGS__) = NULL;                  \
	extern _ret _prefix##_symbol(__VA_ARGS__)

#define LOAD_FUNC_PTR_COMMON(_prefix, _handle, _symbol)                        \
	do {                                                                   \
		*(void **)(&FUNC_PTR(_symbol)) =                               \
			dlsym(_handle, STRINGIFY(_prefix##_symbol));           \
		if (UNLIKELY(!FUNC_PTR(_symbol))) {                            \
		}                                                              \
	} while (0)

// gdrprov patch: each library is loaded on the first call of one of its
// wrappers, not by an ELF constructor at process start, so that a process
// that never calls verbs never opens libibverbs, librdmacm, libibumad or
// libmlx5. DEFINE_LAZY_LOADER(_init) names the file's loader; ENSURE_LOADED()
// runs it once (pthread_once also orders its stores before every later call).
#define DEFINE_LAZY_LOADER(_init)                                              \
	static void _init(void);                                               \
	static pthread_once_t lazy_loader_once = PTHREAD_ONCE_INIT;            \
	static void ensure_loaded(void)                                        \
	{                                                                      \
		pthread_once(&lazy_loader_once, _init);                        \
	}

#define ENSURE_LOADED() ensure_loaded()

// helper macro to return early when symbol is not loaded
#define RETURN_NOT_EXIST(_symbol, ...)                                         \
	do {                                                                   \
		ENSURE_LOADED();                                               \
		if (UNLIKELY(!FUNC_PTR(_symbol))) {                            \
			errno = EOPNOTSUPP;                                    \
			return __VA_ARGS__;                                    \
		}                                                              \
	} while (0)

#endif /* UTILITY_H */
