package codeinterp

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/warrenhq/warren/internal/agent/codeinterp/javakernel"
)

// Env var changes are made by silent executions in the kernel itself, so
// that user code sees them in its own environment (os.environ,
// process.env, $VAR, Sys.getenv; in Java System.getProperty, where E2B
// puts them, and System.getenv) and they never shift line numbers in the
// user's tracebacks. Names are validated shell identifiers; values are
// quoted here for each language.

// envSetCode returns code that sets vars for good (sandbox-wide vars).
func envSetCode(lang string, vars map[string]string) string {
	switch lang {
	case langPython:
		return fmt.Sprintf("__import__('os').environ.update(%s)", jsonLit(vars))
	case langJavaScript, langTypeScript:
		return fmt.Sprintf("Object.assign(process.env, %s);", jsonLit(vars))
	case langBash:
		return bashExports(vars)
	case langR:
		return rSetenv(vars)
	case langJava:
		return javaCall("setEnv", vars)
	}
	return ""
}

// envOverrideCode returns code that remembers the current values of vars'
// names and then sets vars; envRestoreCode undoes it.
func envOverrideCode(lang string, vars map[string]string) string {
	names := slices.Sorted(maps.Keys(vars))
	switch lang {
	case langPython:
		return fmt.Sprintf("__warren_env_saved = {k: __import__('os').environ.get(k) for k in %s}\n%s",
			jsonLit(names), envSetCode(lang, vars))
	case langJavaScript, langTypeScript:
		return fmt.Sprintf("globalThis.__warrenEnvSaved = Object.fromEntries(%s.map(k => [k, process.env[k]]));\n%s",
			jsonLit(names), envSetCode(lang, vars))
	case langBash:
		return fmt.Sprintf("__warren_env_saved=\"$(declare -p %s 2>/dev/null)\"\n%s", strings.Join(names, " "), bashExports(vars))
	case langR:
		// names = TRUE: by default Sys.getenv names its result only when
		// asked for more than one variable.
		return fmt.Sprintf(".warren_env_saved <- Sys.getenv(c(%s), unset = NA, names = TRUE)\n%s", rStrings(names), rSetenv(vars))
	case langJava:
		return javaCall("overrideEnv", vars)
	}
	return ""
}

// envRestoreCode puts back what envOverrideCode saved: the previous value,
// or no variable at all.
func envRestoreCode(lang string, vars map[string]string) string {
	switch lang {
	case langPython:
		return "(lambda env, saved: [env.pop(k, None) if v is None else env.__setitem__(k, v) for k, v in saved.items()])" +
			"(__import__('os').environ, __warren_env_saved)\ndel __warren_env_saved"
	case langJavaScript, langTypeScript:
		return "for (const [k, v] of Object.entries(globalThis.__warrenEnvSaved)) { if (v === undefined) delete process.env[k]; else process.env[k] = v; }\n" +
			"delete globalThis.__warrenEnvSaved;"
	case langBash:
		names := strings.Join(slices.Sorted(maps.Keys(vars)), " ")
		return fmt.Sprintf("unset %s\neval \"$__warren_env_saved\"\nunset __warren_env_saved", names)
	case langR:
		// local: the loop's variables must not land in the user's
		// global environment.
		return "local(for (k in names(.warren_env_saved)) { v <- .warren_env_saved[[k]]; " +
			"if (is.na(v)) Sys.unsetenv(k) else do.call(Sys.setenv, setNames(list(v), k)) })\nrm(.warren_env_saved)"
	case langJava:
		return javaCall("restoreEnv", nil)
	}
	return ""
}

// jsonLit is a literal that Python, JavaScript and TypeScript all read as
// the same string, list or dict: JSON's escapes are a subset of theirs.
func jsonLit(v any) string {
	raw, _ := json.Marshal(v) // strings, slices and maps of strings always encode
	return string(raw)
}

// javaCall calls one of the Java kernel's env var methods with the names
// and values in turn. JSON strings are Java string literals too: Go's
// encoder writes line breaks as \n and \r, never as the \u escapes Java
// would turn into raw line breaks before parsing.
func javaCall(method string, vars map[string]string) string {
	var args []string
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		args = append(args, jsonLit(k), jsonLit(vars[k]))
	}
	return fmt.Sprintf("%s.%s(%s);", javakernel.MainClass, method, strings.Join(args, ", "))
}

func bashExports(vars map[string]string) string {
	var b strings.Builder
	b.WriteString("export")
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		fmt.Fprintf(&b, " %s=%s", k, shellQuote(vars[k]))
	}
	return b.String()
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// rSetenv quotes each name in backticks: a valid env var name need not be
// an R name (_X, or a reserved word such as TRUE or NA). Values are JSON
// strings, whose escapes R reads the same.
func rSetenv(vars map[string]string) string {
	var args []string
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		args = append(args, "`"+k+"` = "+jsonLit(vars[k]))
	}
	return "Sys.setenv(" + strings.Join(args, ", ") + ")"
}

func rStrings(ss []string) string {
	var q []string
	for _, s := range ss {
		q = append(q, jsonLit(s))
	}
	return strings.Join(q, ", ")
}
