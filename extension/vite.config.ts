import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

const here = (path: string) => decodeURIComponent(new URL(path, import.meta.url).pathname);

// The extension is built from the Web App's own components (`@web/...` is ../web/src), never
// copies of them. Their imports of React and the rest resolve here, in this package's
// node_modules, so the bundle holds one React whether or not web/node_modules exists.
export default defineConfig({
  plugins: [react()],
  base: "./",
  resolve: {
    alias: { "@web": here("../web/src") },
    dedupe: [
      "react",
      "react-dom",
      "@tanstack/react-query",
      "@tanstack/react-virtual",
      "react-markdown",
      "rehype-sanitize",
      "remark-gfm",
    ],
  },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    // Manifest V3 pages allow script-src 'self' only: no inline script or style, no eval.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: "es2022",
    chunkSizeWarningLimit: 800,
    rollupOptions: {
      input: {
        sidepanel: here("sidepanel.html"),
        options: here("options.html"),
        background: here("src/background.ts"),
      },
      output: {
        // The manifest names the service worker by a fixed path.
        entryFileNames: (chunk) =>
          chunk.name === "background" ? "background.js" : "assets/[name]-[hash].js",
      },
    },
  },
});
