"""Anti-cheat as a library: screen an action before it runs, answer it if intercepted, and
ask the judge about what the rules cannot decide. No Docker, no FastAPI: the API's
POST /v1/screen and the workers import it alike. See README.md for the stages."""
