"""The Gemini dialect (`generateContent`), on the Gemini API and Vertex AI: sans-I/O."""
