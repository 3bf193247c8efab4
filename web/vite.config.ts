import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

// The build lands inside the Python package, which serves it at / (search2o.api.webapp).
export default defineConfig({
  plugins: [react()],
  base: "/",
  build: {
    outDir: "../src/search2o/webapp/dist",
    emptyOutDir: true,
    // No inline scripts or styles: the page's Content-Security-Policy allows 'self' only.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: "es2022",
    chunkSizeWarningLimit: 800,
  },
  server: {
    proxy: { "/v1": "http://127.0.0.1:8000" },
  },
});
