import { defineConfig } from "vite";

// The dashboard is served by warren at /dashboard/ from the files
// embedded in internal/web (see internal/web/web.go).
export default defineConfig({
  base: "/dashboard/",
  build: {
    outDir: "../internal/web/dist",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    modulePreload: { polyfill: false },
  },
});
