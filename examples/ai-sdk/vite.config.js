// The page calls kerneld on its own origin: the dev server passes the API
// paths on to kerneld (KERNELD_URL, default http://127.0.0.1:8080, where
// `make run` listens), so no CORS setup is needed.
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

const kerneld = process.env.KERNELD_URL ?? "http://127.0.0.1:8080";

export default defineConfig({
  plugins: [react()],
  server: {
    proxy: {
      "/agents": kerneld,
      "/sessions": kerneld,
    },
  },
});
